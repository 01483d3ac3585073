// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <yaml.h>

#include "kube/kubeconfig.h"
#include "kube/kubeconfig_impl.h"

/* a kubeconfig nests 4 deep (contexts, entry, context, field): room to spare */
#define MAX_DEPTH 32
/* each event is a node the loader keeps: 1 MiB of "- a" lines would make 260k */
#define MAX_EVENTS 100000
#define NAMES_MAX 160 /* of the list of names in a "not found" message */
#define LABEL_MAX 128
#define PREFIX "kubeconfig: "

/* A loaded document, and where relative paths start and errors go. */
struct parser {
	yaml_document_t *doc;
	const char *base_dir;
	struct rw_error *err;
	unsigned int flags; /* KUBECONFIG_* */
};

static int syntax_error(yaml_parser_t *yp, struct rw_error *err)
{
	if (yp->error == YAML_MEMORY_ERROR)
		return rw_error_set(err, ENOMEM, "out of memory");
	/* the reader (encoding, control characters) has an offset, not a line */
	if (yp->error == YAML_READER_ERROR)
		return rw_error_set(err, EINVAL,
				    PREFIX "not valid yaml at byte %zu: %s: save it as utf-8 text",
				    yp->problem_offset, yp->problem ? yp->problem : "error");
	return rw_error_set(err, EINVAL,
			    PREFIX "not valid yaml at line %zu column %zu: %s: fix the syntax",
			    yp->problem_mark.line + 1, yp->problem_mark.column + 1,
			    yp->problem ? yp->problem : "error");
}

static int check_event(yaml_event_type_t type, int depth, size_t n, size_t line,
		       struct rw_error *err)
{
	if (type == YAML_ALIAS_EVENT)
		return rw_error_set(
			err, EINVAL,
			PREFIX "line %zu: aliases (*name) are not supported: write the value out",
			line);
	if (depth > MAX_DEPTH)
		return rw_error_set(err, EINVAL,
				    PREFIX "line %zu: nested over %d levels deep: not a kubeconfig",
				    line, MAX_DEPTH);
	if (n > MAX_EVENTS)
		return rw_error_set(err, EINVAL, PREFIX "over %d yaml nodes: not a kubeconfig",
				    MAX_EVENTS);
	return 0;
}

/*
 * One pass over the first document's events before loading it, to refuse what
 * would make the loaded tree (or a walk over it) grow beyond the text: aliases
 * (one node reachable many times: "billion laughs"), deep nesting, many nodes.
 */
static int check_events(const char *text, size_t len, struct rw_error *err)
{
	yaml_event_type_t type;
	yaml_parser_t yp;
	yaml_event_t ev;
	int depth = 0, ret = 0;
	size_t line;

	if (!yaml_parser_initialize(&yp))
		return rw_error_set(err, ENOMEM, "out of memory");
	yaml_parser_set_input_string(&yp, (const unsigned char *)text, len);
	for (size_t n = 0; !ret; n++) {
		if (!yaml_parser_parse(&yp, &ev)) {
			ret = syntax_error(&yp, err);
			break;
		}
		type = ev.type;
		line = ev.start_mark.line + 1;
		yaml_event_delete(&ev);
		if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT)
			depth++;
		else if (type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT)
			depth--;
		ret = check_event(type, depth, n, line, err);
		if (type == YAML_DOCUMENT_END_EVENT || type == YAML_STREAM_END_EVENT)
			break;
	}
	yaml_parser_delete(&yp);
	return ret;
}

static int load_doc(const char *text, size_t len, yaml_document_t *doc, struct rw_error *err)
{
	yaml_parser_t yp;
	int ret = check_events(text, len, err);

	if (ret)
		return ret;
	if (!yaml_parser_initialize(&yp))
		return rw_error_set(err, ENOMEM, "out of memory");
	yaml_parser_set_input_string(&yp, (const unsigned char *)text, len);
	/* on failure the loader frees what it built */
	if (!yaml_parser_load(&yp, doc))
		ret = syntax_error(&yp, err);
	yaml_parser_delete(&yp);
	return ret;
}

static yaml_node_t *node(struct parser *p, int id)
{
	return yaml_document_get_node(p->doc, id);
}

static bool is_scalar(const yaml_node_t *n, const char *s)
{
	return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == strlen(s) &&
	       !memcmp(n->data.scalar.value, s, n->data.scalar.length);
}

/* Absent, or a plain null ("", "~", "null"): Go's yaml reads these as unset. */
static bool is_null(const yaml_node_t *n)
{
	if (!n)
		return true;
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	return is_scalar(n, "") || is_scalar(n, "~") || is_scalar(n, "null") ||
	       is_scalar(n, "Null") || is_scalar(n, "NULL");
}

/*
 * The value of key in mapping m, or NULL (absent, or m is not a mapping). Of
 * a key given twice, the last, as kubectl reads it.
 */
static yaml_node_t *map_get(struct parser *p, yaml_node_t *m, const char *key)
{
	yaml_node_t *v = NULL;

	if (!m || m->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *pair = m->data.mapping.pairs.start; pair < m->data.mapping.pairs.top;
	     pair++)
		if (is_scalar(node(p, pair->key), key))
			v = node(p, pair->value);
	return v;
}

/*
 * The string at key of mapping m into *ret: NULL when absent, null or "".
 * owner names m in messages ("cluster \"c\""), or is "" at the top level.
 */
static int get_string(struct parser *p, yaml_node_t *m, const char *key, const char *owner,
		      const char **ret)
{
	yaml_node_t *v = map_get(p, m, key);
	const char *s;

	*ret = NULL;
	/* "" quoted too: Go cannot tell an empty string from an unset one */
	if (is_null(v) || (v->type == YAML_SCALAR_NODE && !v->data.scalar.length))
		return 0;
	if (v->type != YAML_SCALAR_NODE)
		return rw_error_set(p->err, EINVAL,
				    PREFIX "%s%s%s is not a string: write it as %s: VALUE", owner,
				    *owner ? " " : "", key, key);
	s = (const char *)v->data.scalar.value;
	/* "\0" in a double-quoted string */
	if (strlen(s) != v->data.scalar.length)
		return rw_error_set(p->err, EINVAL,
				    PREFIX "%s%s%s holds a NUL character: remove it", owner,
				    *owner ? " " : "", key);
	*ret = s;
	return 0;
}

static int copy_string(struct parser *p, const char *s, char **ret)
{
	*ret = strdup(s);
	return *ret ? 0 : rw_error_set(p->err, ENOMEM, "out of memory");
}

/* No space, control character or non-ASCII byte (it goes into a URL or a header). */
static bool is_printable(const char *s)
{
	for (; *s; s++)
		if (*s <= ' ' || *s >= 0x7f)
			return false;
	return true;
}

/* A DNS-1123 label, as Kubernetes names namespaces: it goes into URL paths. */
bool kubeconfig__is_namespace(const char *s, size_t len)
{
	if (!len || len > 63 || s[0] == '-' || s[len - 1] == '-')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* The names of the entries of list (a sequence node), for a "not found" message. */
static void list_names(struct parser *p, yaml_node_t *list, char *buf, size_t size)
{
	size_t n = 0;

	snprintf(buf, size, "none");
	if (!list || list->type != YAML_SEQUENCE_NODE)
		return;
	for (yaml_node_item_t *it = list->data.sequence.items.start;
	     it < list->data.sequence.items.top; it++) {
		yaml_node_t *name = map_get(p, node(p, *it), "name");
		const char *s;

		if (!name || name->type != YAML_SCALAR_NODE)
			continue;
		s = (const char *)name->data.scalar.value;
		if (n + strlen(s) + 6 >= size) {
			snprintf(buf + n, size - n, "%s...", n ? ", " : "");
			return;
		}
		n += snprintf(buf + n, size - n, "%s%s", n ? ", " : "", s);
	}
}

/*
 * The entry named name in list (contexts, clusters, users) of root: its item
 * mapping ("context", "cluster", "user") into *ret, NULL when empty. of says
 * whose it is in messages (" of context \"x\"", or "").
 */
static int find_named(struct parser *p, yaml_node_t *root, const char *list, const char *item,
		      const char *name, const char *of, yaml_node_t **ret)
{
	yaml_node_t *seq = map_get(p, root, list), *found = NULL, *inner;
	char label[LABEL_MAX], names[NAMES_MAX];
	size_t i = 0;

	*ret = NULL;
	if (is_null(seq))
		seq = NULL;
	if (seq && seq->type != YAML_SEQUENCE_NODE)
		return rw_error_set(p->err, EINVAL,
				    PREFIX "%s is not a list: write it as - name: NAME entries",
				    list);
	for (yaml_node_item_t *it = seq ? seq->data.sequence.items.start : NULL;
	     seq && it < seq->data.sequence.items.top; it++, i++) {
		yaml_node_t *e = node(p, *it);
		const char *n;
		int err;

		snprintf(label, sizeof(label), "%s[%zu]", list, i);
		if (!e || e->type != YAML_MAPPING_NODE)
			return rw_error_set(
				p->err, EINVAL,
				PREFIX "%s is not a mapping: give it name: and %s:", label, item);
		err = get_string(p, e, "name", label, &n);
		if (err)
			return err;
		if (!n || strcmp(n, name))
			continue;
		if (found)
			return rw_error_set(p->err, EINVAL,
					    PREFIX
					    "two %s are named \"%.64s\": rename or remove one",
					    list, name);
		found = e;
	}
	if (!found) {
		list_names(p, seq, names, sizeof(names));
		return rw_error_set(p->err, ENOENT, PREFIX "%s \"%.64s\"%s not found (%s: %s)",
				    item, name, of, list, names);
	}
	inner = map_get(p, found, item);
	if (!is_null(inner) && inner->type != YAML_MAPPING_NODE)
		return rw_error_set(p->err, EINVAL, PREFIX "%s \"%.64s\": %s is not a mapping",
				    item, name, item);
	*ret = is_null(inner) ? NULL : inner;
	return 0;
}

static int base64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/*
 * Padded standard base64 (what Go's encoding/json writes for []byte), white
 * space ignored. 0, or -EINVAL with *ret_bad at the offending character
 * (len when the text ends mid-quantum), or -ENOMEM. *ret is NUL-terminated.
 */
static int base64_decode(const char *s, size_t len, char **ret, size_t *ret_len, size_t *ret_bad)
{
	unsigned char *out = malloc(len / 4 * 3 + 4);
	size_t n = 0, o = 0, pad = 0, i;
	uint32_t acc = 0;

	if (!out)
		return -ENOMEM;
	for (i = 0; i < len; i++) {
		int v = 0;

		if (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')
			continue;
		/* padding only ends the last quantum, after 2 or 3 characters */
		if (pad && n % 4 == 0)
			break;
		if (s[i] == '=' && n % 4 < 2)
			break;
		if (s[i] == '=')
			pad++;
		else if (pad || (v = base64_value(s[i])) < 0)
			break;
		acc = acc << 6 | (uint32_t)v;
		if (++n % 4)
			continue;
		out[o++] = acc >> 16;
		out[o++] = acc >> 8;
		out[o++] = acc;
		o -= pad;
		acc = 0;
	}
	if (i < len || n % 4) {
		free(out);
		*ret_bad = i;
		return -EINVAL;
	}
	out[o] = '\0';
	*ret = (char *)out;
	*ret_len = o;
	return 0;
}

/* The base64 PEM text of field key of owner into *ret. */
static int decode_pem(struct parser *p, const char *owner, const char *key, const char *text,
		      char **ret, size_t *ret_len)
{
	size_t bad;
	int err = base64_decode(text, strlen(text), ret, ret_len, &bad);

	if (err == -ENOMEM)
		return rw_error_set(p->err, ENOMEM, "out of memory");
	if (err)
		return rw_error_set(
			p->err, EINVAL,
			PREFIX
			"%s %s is not valid base64 (at character %zu): write the output of base64 -w0 FILE",
			owner, key, bad + 1);
	/* a DER file, or base64 applied twice, decodes without complaint */
	if (!memmem(*ret, *ret_len, "-----BEGIN ", strlen("-----BEGIN "))) {
		free(*ret);
		*ret = NULL;
		*ret_len = 0;
		return rw_error_set(
			p->err, EINVAL,
			PREFIX
			"%s %s does not decode to PEM (no -----BEGIN line): encode the PEM file once",
			owner, key);
	}
	return 0;
}

/* path (field key of owner) made absolute against the kubeconfig's directory. */
static int resolve_path(struct parser *p, const char *owner, const char *key, const char *path,
			char **ret)
{
	if (path[0] == '/')
		return copy_string(p, path, ret);
	if (!p->base_dir)
		return rw_error_set(
			p->err, EINVAL,
			PREFIX
			"%s %s \"%.64s\" is a relative path and the kubeconfig's directory is unknown: write an absolute path",
			owner, key, path);
	if (strlen(p->base_dir) + strlen(path) + 2 > PATH_MAX)
		return rw_error_set(p->err, EINVAL,
				    PREFIX "%s %s is longer than a path can be: shorten it", owner,
				    key);
	if (asprintf(ret, "%s/%s", p->base_dir, path) < 0) {
		*ret = NULL;
		return rw_error_set(p->err, ENOMEM, "out of memory");
	}
	return 0;
}

/* PEM from data_key (base64), or else a file from file_key, of mapping m. */
static int get_pem(struct parser *p, yaml_node_t *m, const char *owner, const char *data_key,
		   const char *file_key, char **ret_pem, size_t *ret_len, char **ret_file)
{
	const char *data, *file;
	int err = get_string(p, m, data_key, owner, &data);

	if (!err && data)
		return decode_pem(p, owner, data_key, data, ret_pem, ret_len);
	if (!err)
		err = get_string(p, m, file_key, owner, &file);
	if (!err && file)
		err = resolve_path(p, owner, file_key, file, ret_file);
	return err;
}

static int get_bool(struct parser *p, yaml_node_t *m, const char *key, const char *owner, bool *ret)
{
	/* YAML 1.1 as Go's yaml.v2 (which kubectl uses) reads it */
	static const char *const yes[] = { "true", "True", "TRUE", "yes", "Yes",
					   "YES",  "on",   "On",   "ON" };
	static const char *const no[] = { "false", "False", "FALSE", "no", "No",
					  "NO",	   "off",   "Off",   "OFF" };
	const char *s;
	int err = get_string(p, m, key, owner, &s);

	*ret = false;
	if (err || !s)
		return err;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcmp(s, yes[i]))
			*ret = true;
		if (!strcmp(s, yes[i]) || !strcmp(s, no[i]))
			return 0;
	}
	return rw_error_set(p->err, EINVAL, PREFIX "%s %s is \"%.32s\": write true or false", owner,
			    key, s);
}

/* https://host[:port][/path] without trailing slashes; no scheme means https, as in kubectl. */
static int set_server(struct parser *p, const char *owner, const char *server, char **ret)
{
	const char *sep = server ? strstr(server, "://") : NULL, *host;
	size_t len;

	if (!server)
		return rw_error_set(p->err, EINVAL,
				    PREFIX "%s has no server: set server: https://HOST:PORT",
				    owner);
	if (!is_printable(server))
		return rw_error_set(
			p->err, EINVAL,
			PREFIX "%s server holds a space or control character: remove it", owner);
	if (sep && (sep - server != 5 || strncasecmp(server, "https", 5)))
		return rw_error_set(
			p->err, EINVAL,
			PREFIX
			"%s server \"%.100s\" is not https: retwatch sends credentials only over https",
			owner, server);
	host = sep ? sep + 3 : server;
	len = strlen(host);
	while (len && host[len - 1] == '/')
		len--;
	if (!len || host[0] == '/')
		return rw_error_set(
			p->err, EINVAL,
			PREFIX "%s server \"%.100s\" has no host: set server: https://HOST:PORT",
			owner, server);
	if (asprintf(ret, "https://%.*s", (int)len, host) < 0) {
		*ret = NULL;
		return rw_error_set(p->err, ENOMEM, "out of memory");
	}
	return 0;
}

static int fill_cluster(struct parser *p, yaml_node_t *root, const char *ctx_name, yaml_node_t *ctx,
			struct kube_creds *c)
{
	char owner[LABEL_MAX], of[LABEL_MAX];
	const char *name, *server;
	yaml_node_t *cl;
	int err;

	snprintf(owner, sizeof(owner), "context \"%.64s\"", ctx_name);
	err = get_string(p, ctx, "cluster", owner, &name);
	if (err)
		return err;
	if (!name)
		return rw_error_set(
			p->err, EINVAL,
			PREFIX "%s names no cluster: set its cluster to one of clusters[].name",
			owner);
	snprintf(of, sizeof(of), " of context \"%.64s\"", ctx_name);
	err = find_named(p, root, "clusters", "cluster", name, of, &cl);
	if (err)
		return err;
	snprintf(owner, sizeof(owner), "cluster \"%.64s\"", name);
	err = get_string(p, cl, "server", owner, &server);
	if (!err)
		err = set_server(p, owner, server, &c->server);
	if (!err)
		err = get_pem(p, cl, owner, "certificate-authority-data", "certificate-authority",
			      &c->ca_pem, &c->ca_pem_len, &c->ca_file);
	if (!err)
		err = get_bool(p, cl, "insecure-skip-tls-verify", owner, &c->insecure);
	return err;
}

/* Items of sequence n (absent or null: none); -EINVAL when n is not a sequence or too long. */
static int seq_items(struct parser *p, yaml_node_t *n, const char *what, const char *owner,
		     size_t max, yaml_node_item_t **ret_start, size_t *ret_n)
{
	*ret_start = NULL;
	*ret_n = 0;
	if (is_null(n))
		return 0;
	if (n->type != YAML_SEQUENCE_NODE)
		return rw_error_set(p->err, EINVAL, PREFIX "%s exec %s is not a list", owner, what);
	*ret_start = n->data.sequence.items.start;
	*ret_n = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	if (*ret_n > max)
		return rw_error_set(p->err, EINVAL, PREFIX "%s exec %s has over %zu items", owner,
				    what, max);
	return 0;
}

/* A scalar string item of a list (no NUL in it), or NULL. */
static const char *item_string(struct parser *p, yaml_node_item_t id)
{
	yaml_node_t *n = node(p, id);

	if (!n || n->type != YAML_SCALAR_NODE ||
	    strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
		return NULL;
	return (const char *)n->data.scalar.value;
}

/* users[].user.exec, as kubectl runs it (client.authentication.k8s.io). */
static int get_exec(struct parser *p, yaml_node_t *exec, const char *owner, struct kube_creds *c)
{
	const char *command, *version, *hint;
	yaml_node_item_t *items;
	struct kube_exec *x;
	size_t n, ne;
	int err;

	err = get_string(p, exec, "command", owner, &command);
	if (!err && !command)
		err = rw_error_set(p->err, EINVAL, PREFIX "%s exec has no command: add one", owner);
	if (!err)
		err = get_string(p, exec, "apiVersion", owner, &version);
	if (!err && (!version || (strcmp(version, "client.authentication.k8s.io/v1") &&
				  strcmp(version, "client.authentication.k8s.io/v1beta1"))))
		err = rw_error_set(
			p->err, EINVAL,
			PREFIX
			"%s exec apiVersion is %.64s: write client.authentication.k8s.io/v1 (or v1beta1)",
			owner, version ? version : "unset");
	if (!err)
		err = get_string(p, exec, "installHint", owner, &hint);
	if (err)
		return err;
	x = calloc(1, sizeof(*x));
	if (!x)
		return rw_error_set(p->err, ENOMEM, "out of memory");
	c->exec = x;
	/* a relative path is the kubeconfig's directory's, a bare name PATH's */
	err = strchr(command, '/') ? resolve_path(p, owner, "exec command", command, &x->command)
				   : copy_string(p, command, &x->command);
	if (!err)
		err = copy_string(p, version, &x->api_version);
	if (!err && hint)
		err = copy_string(p, hint, &x->install_hint);
	if (!err)
		err = seq_items(p, map_get(p, exec, "args"), "args", owner, KUBE_EXEC_MAX_ARGS,
				&items, &n);
	if (!err && !(x->argv = calloc(n + 2, sizeof(*x->argv))))
		err = rw_error_set(p->err, ENOMEM, "out of memory");
	if (!err)
		err = copy_string(p, x->command, &x->argv[0]);
	for (size_t i = 0; !err && i < n; i++) {
		const char *a = item_string(p, items[i]);

		err = a ? copy_string(p, a, &x->argv[i + 1])
			: rw_error_set(p->err, EINVAL, PREFIX "%s exec args[%zu] is not a string",
				       owner, i);
	}
	if (!err)
		err = seq_items(p, map_get(p, exec, "env"), "env", owner, KUBE_EXEC_MAX_ENV, &items,
				&ne);
	if (!err && !(x->env = calloc(ne + 1, sizeof(*x->env))))
		err = rw_error_set(p->err, ENOMEM, "out of memory");
	for (size_t i = 0; !err && i < ne; i++) {
		yaml_node_t *e = node(p, items[i]);
		const char *name = NULL, *value = NULL;

		err = get_string(p, e, "name", owner, &name);
		if (!err)
			err = get_string(p, e, "value", owner, &value);
		if (!err && (!name || strchr(name, '=')))
			err = rw_error_set(p->err, EINVAL,
					   PREFIX "%s exec env[%zu] needs a name without '='",
					   owner, i);
		if (!err && asprintf(&x->env[i], "%s=%s", name, value ? value : "") < 0) {
			x->env[i] = NULL;
			err = rw_error_set(p->err, ENOMEM, "out of memory");
		}
	}
	return err;
}

/* Plugins run programs and talk to clouds: the agent only takes what the file holds. */
static int refuse_plugins(struct parser *p, yaml_node_t *u, const char *owner)
{
	yaml_node_t *exec = map_get(p, u, "exec"), *ap = map_get(p, u, "auth-provider");
	yaml_node_t *what;

	if (!is_null(exec) && (p->flags & KUBECONFIG_EXEC))
		return 0;
	if (!is_null(exec)) {
		what = map_get(p, exec, "command");
		return rw_error_set(
			p->err, EOPNOTSUPP,
			PREFIX
			"%s gets its credentials from an exec plugin (%.64s), which the agent does not run: give it a token, tokenFile or client certificate",
			owner,
			what && what->type == YAML_SCALAR_NODE ? (char *)what->data.scalar.value
							       : "?");
	}
	if (!is_null(ap)) {
		what = map_get(p, ap, "name");
		return rw_error_set(
			p->err, EOPNOTSUPP,
			PREFIX
			"%s uses the %.64s auth-provider, which retwatch does not support: give it a token, tokenFile or client certificate",
			owner,
			what && what->type == YAML_SCALAR_NODE ? (char *)what->data.scalar.value
							       : "?");
	}
	return 0;
}

static int get_token(struct parser *p, yaml_node_t *u, const char *owner, struct kube_creds *c)
{
	const char *token, *file;
	int err = get_string(p, u, "token", owner, &token);

	if (!err && token && !is_printable(token))
		return rw_error_set(p->err, EINVAL,
				    PREFIX "%s token holds a space or control character: remove it",
				    owner);
	if (!err && token)
		err = copy_string(p, token, &c->token);
	if (!err)
		err = get_string(p, u, "tokenFile", owner, &file);
	if (!err && file)
		err = resolve_path(p, owner, "tokenFile", file, &c->token_file);
	return err;
}

static int fill_user(struct parser *p, yaml_node_t *root, const char *ctx_name, yaml_node_t *ctx,
		     struct kube_creds *c)
{
	char owner[LABEL_MAX], of[LABEL_MAX];
	bool cert, key;
	const char *name;
	yaml_node_t *u;
	int err;

	snprintf(owner, sizeof(owner), "context \"%.64s\"", ctx_name);
	err = get_string(p, ctx, "user", owner, &name);
	if (err)
		return err;
	if (!name)
		return rw_error_set(p->err, EINVAL,
				    PREFIX "%s names no user: set its user to one of users[].name",
				    owner);
	snprintf(of, sizeof(of), " of context \"%.64s\"", ctx_name);
	err = find_named(p, root, "users", "user", name, of, &u);
	if (err)
		return err;
	snprintf(owner, sizeof(owner), "user \"%.64s\"", name);
	err = refuse_plugins(p, u, owner);
	if (!err && !is_null(map_get(p, u, "exec")))
		err = get_exec(p, map_get(p, u, "exec"), owner, c);
	if (!err)
		err = get_token(p, u, owner, c);
	if (!err)
		err = get_pem(p, u, owner, "client-certificate-data", "client-certificate",
			      &c->cert_pem, &c->cert_pem_len, &c->cert_file);
	if (!err)
		err = get_pem(p, u, owner, "client-key-data", "client-key", &c->key_pem,
			      &c->key_pem_len, &c->key_file);
	if (err)
		return err;
	cert = c->cert_pem || c->cert_file;
	key = c->key_pem || c->key_file;
	if (cert != key)
		return rw_error_set(
			p->err, EINVAL,
			PREFIX
			"%s has a client %s but no client %s: add client-%s or client-%s-data",
			owner, cert ? "certificate" : "key", cert ? "key" : "certificate",
			cert ? "key" : "certificate", cert ? "key" : "certificate");
	if (!cert && !c->token && !c->token_file && !c->exec)
		return rw_error_set(
			p->err, EINVAL,
			PREFIX
			"%s has no credentials (token, tokenFile, client-certificate and client-key%s): add one",
			owner,
			is_null(map_get(p, u, "username"))
				? ""
				: "; username and password are not supported");
	return 0;
}

static int fill_namespace(struct parser *p, const char *ctx_name, yaml_node_t *ctx,
			  struct kube_creds *c)
{
	char owner[LABEL_MAX];
	const char *ns;
	int err;

	snprintf(owner, sizeof(owner), "context \"%.64s\"", ctx_name);
	err = get_string(p, ctx, "namespace", owner, &ns);
	if (err || !ns)
		return err;
	if (!kubeconfig__is_namespace(ns, strlen(ns)))
		return rw_error_set(
			p->err, EINVAL,
			PREFIX
			"%s namespace \"%.64s\" is not a namespace name: use lowercase letters, digits and '-'",
			owner, ns);
	return copy_string(p, ns, &c->namespace);
}

/* The context to use: context, or else current-context. */
static int pick_context(struct parser *p, yaml_node_t *root, const char *context,
			const char **ret_name, yaml_node_t **ret)
{
	const char *name = context;
	int err;

	if (!name || !*name) {
		err = get_string(p, root, "current-context", "", &name);
		if (err)
			return err;
		if (!name)
			return rw_error_set(
				p->err, EINVAL,
				PREFIX
				"no current-context: name a context, or set one with kubectl config use-context NAME");
	}
	*ret_name = name;
	return find_named(p, root, "contexts", "context", name, "", ret);
}

int kubeconfig__parse(const char *text, size_t len, const char *context, const char *base_dir,
		      struct kube_creds *ret, struct rw_error *err)
{
	return kubeconfig__parse_opts(text, len, context, base_dir, 0, ret, err);
}

int kubeconfig__parse_opts(const char *text, size_t len, const char *context, const char *base_dir,
			   unsigned int flags, struct kube_creds *ret, struct rw_error *err)
{
	yaml_document_t doc;
	struct parser p = { &doc, base_dir, err, flags };
	struct kube_creds c = {};
	yaml_node_t *root, *ctx = NULL;
	const char *ctx_name = NULL;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (len > KUBECONFIG_MAX)
		return rw_error_set(err, EFBIG,
				    PREFIX "%zu bytes is over the limit of %d: not a kubeconfig",
				    len, KUBECONFIG_MAX);
	r = load_doc(text, len, &doc, err);
	if (r)
		return r;
	root = yaml_document_get_root_node(&doc);
	if (is_null(root))
		r = rw_error_set(
			err, EINVAL,
			PREFIX "the file is empty: write a kubeconfig (kubectl config view --raw)");
	else if (root->type != YAML_MAPPING_NODE)
		r = rw_error_set(err, EINVAL,
				 PREFIX "the top level is not a mapping: not a kubeconfig");
	if (!r)
		r = pick_context(&p, root, context, &ctx_name, &ctx);
	if (!r)
		r = fill_cluster(&p, root, ctx_name, ctx, &c);
	if (!r)
		r = fill_user(&p, root, ctx_name, ctx, &c);
	if (!r)
		r = fill_namespace(&p, ctx_name, ctx, &c);
	if (!r && c.exec)
		r = copy_string(&p, c.server, &c.exec->server);
	yaml_document_delete(&doc);
	if (r)
		kube_creds__free(&c);
	else
		*ret = c;
	return r;
}

/* Up to max bytes of a file into *ret (NUL-terminated); -EFBIG when it holds more. */
int kubeconfig__read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	char *buf = malloc(max + 2);
	size_t len = 0;
	int fd = -1, err = 0;

	if (!buf)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		err = -errno;
	while (!err && len <= max) {
		ssize_t n = read(fd, buf + len, max + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			err = -errno;
		if (n <= 0)
			break;
		len += n;
	}
	if (!err && len > max)
		err = -EFBIG;
	if (fd >= 0)
		close(fd);
	if (err) {
		explicit_bzero(buf, len);
		free(buf);
		return err;
	}
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

/* The absolute directory of path: relative paths in a kubeconfig start there. */
static int abs_dir(const char *path, char **ret)
{
	const char *slash = strrchr(path, '/');
	char cwd[PATH_MAX];
	int n;

	if (slash == path)
		return (*ret = strdup("/")) ? 0 : -ENOMEM;
	if (path[0] == '/')
		return (*ret = strndup(path, slash - path)) ? 0 : -ENOMEM;
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	if (slash)
		n = asprintf(ret, "%s/%.*s", cwd, (int)(slash - path), path);
	else
		n = asprintf(ret, "%s", cwd);
	if (n < 0) {
		*ret = NULL;
		return -ENOMEM;
	}
	return 0;
}

int kubeconfig__load(const char *path, const char *context, struct kube_creds *ret,
		     struct rw_error *err)
{
	return kubeconfig__load_opts(path, context, 0, ret, err);
}

int kubeconfig__load_opts(const char *path, const char *context, unsigned int flags,
			  struct kube_creds *ret, struct rw_error *err)
{
	char *text = NULL, *dir = NULL, msg[sizeof(err->msg)];
	size_t len = 0;
	int r;

	memset(ret, 0, sizeof(*ret));
	r = kubeconfig__read_file(path, KUBECONFIG_MAX, &text, &len);
	if (r == -EFBIG)
		return rw_error_set(err, EFBIG, "kubeconfig %s is over %d bytes: not a kubeconfig",
				    path, KUBECONFIG_MAX);
	if (r)
		return rw_error_set(err, -r, "failed to read kubeconfig %s: %s", path,
				    strerror(-r));
	r = abs_dir(path, &dir);
	if (r)
		rw_error_set(err, -r, "failed to find the directory of kubeconfig %s: %s", path,
			     strerror(-r));
	if (!r)
		r = kubeconfig__parse_opts(text, len, context, dir, flags, ret, err);
	/* "kubeconfig: x" -> "kubeconfig PATH: x": which file, when there are several */
	if (r && err && !strncmp(err->msg, PREFIX, strlen(PREFIX))) {
		snprintf(msg, sizeof(msg), "%s", err->msg + strlen(PREFIX));
		rw_error_set(err, -r, "kubeconfig %s: %s", path, msg);
	}
	explicit_bzero(text, len);
	free(text);
	free(dir);
	return r;
}

static void wipe_free(char *p, size_t len)
{
	if (!p)
		return;
	explicit_bzero(p, len);
	free(p);
}

void kube_creds__free(struct kube_creds *c)
{
	if (!c)
		return;
	free(c->server);
	free(c->ca_pem);
	free(c->ca_file);
	free(c->cert_pem);
	free(c->cert_file);
	wipe_free(c->key_pem, c->key_pem_len);
	free(c->key_file);
	wipe_free(c->token, c->token ? strlen(c->token) : 0);
	free(c->token_file);
	free(c->namespace);
	kube_exec__free(c->exec);
	memset(c, 0, sizeof(*c));
}
