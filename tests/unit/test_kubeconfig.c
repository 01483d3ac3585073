// SPDX-License-Identifier: MIT
/*
 * Kubeconfig parsing: files in the shapes kubectl, kind and the clouds
 * write, every field the agent takes, the mistakes users make (each message
 * says what to change), YAML that would blow up a loader, and the in-cluster
 * service account variant.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "kube/kubeexec.h"
#include "test.h"

#define CA_PEM                                                               \
	"-----BEGIN CERTIFICATE-----\n"                                      \
	"MIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAjMSEwHwYDVQQDDBhrM3Mtc2Vy\n" \
	"-----END CERTIFICATE-----\n"
#define CA_B64                                                                                     \
	"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJkekNDQVIyZ0F3SUJBZ0lCQURBS0JnZ3Foa2pPUFFRREFq" \
	"QWpNU0V3SHdZRFZRUUREQmhyTTNNdGMyVnkKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
#define CERT_PEM                                                             \
	"-----BEGIN CERTIFICATE-----\n"                                      \
	"MIIBkTCCATegAwIBAgIIVh4Zt3z1Y9swCgYIKoZIzj0EAwIwIzEhMB8GA1UEAwwY\n" \
	"-----END CERTIFICATE-----\n"
#define CERT_B64                                                                                   \
	"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJrVENDQVRlZ0F3SUJBZ0lJVmg0WnQzejFZOXN3Q2dZSUtv" \
	"Wkl6ajBFQXdJd0l6RWhNQjhHQTFVRUF3d1kKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
#define KEY_PEM                                                              \
	"-----BEGIN EC PRIVATE KEY-----\n"                                   \
	"MHcCAQEEIIRmYWtlIGtleSBmb3IgdGVzdHMgb25seSwgbm90IGEgcmVhbCBrZXk=\n" \
	"-----END EC PRIVATE KEY-----\n"
#define KEY_B64                                                                                    \
	"LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUlSbVlXdGxJR3RsZVNCbWIzSWdkR1Z6ZEhN" \
	"Z2IyNXNlU3dnYm05MElHRWdjbVZoYkNCclpYaz0KLS0tLS1FTkQgRUMgUFJJVkFURSBLRVktLS0tLQo="
#define TOKEN                                                                                     \
	"eyJhbGciOiJSUzI1NiIsImtpZCI6InRlc3QifQ.eyJpc3MiOiJrdWJlcm5ldGVzL3NlcnZpY2VhY2NvdW50In0." \
	"c2lnbmF0dXJl"

/* `kubectl config view --raw` of a kind cluster */
static const char kind_raw[] = "apiVersion: v1\n"
			       "clusters:\n"
			       "- cluster:\n"
			       "    certificate-authority-data: " CA_B64 "\n"
			       "    server: https://127.0.0.1:39953\n"
			       "  name: kind-kind\n"
			       "contexts:\n"
			       "- context:\n"
			       "    cluster: kind-kind\n"
			       "    user: kind-kind\n"
			       "  name: kind-kind\n"
			       "current-context: kind-kind\n"
			       "kind: Config\n"
			       "preferences: {}\n"
			       "users:\n"
			       "- name: kind-kind\n"
			       "  user:\n"
			       "    client-certificate-data: " CERT_B64 "\n"
			       "    client-key-data: " KEY_B64 "\n";

/* Hand-written, several contexts, files beside it. */
static const char multi[] =
	"apiVersion: v1\n"
	"kind: Config\n"
	"current-context: dev\n"
	"clusters:\n"
	"  - name: dev-cluster\n"
	"    cluster:\n"
	"      server: \"https://dev.k8s.example.com:6443/\"\n"
	"      certificate-authority-data: >-\n"
	"        " CA_B64 "\n"
	"  - name: prod-cluster\n"
	"    cluster:\n"
	"      server: https://[2001:db8::10]:6443\n"
	"      certificate-authority: ca/prod.crt\n"
	"  - name: lab\n"
	"    cluster:\n"
	"      server: lab.internal:6443\n"
	"      insecure-skip-tls-verify: true\n"
	"contexts:\n"
	"  - name: dev\n"
	"    context: {cluster: dev-cluster, user: dev-token, namespace: team-a}\n"
	"  - name: prod\n"
	"    context:\n"
	"      cluster: prod-cluster\n"
	"      user: prod-sa\n"
	"      namespace: ~\n"
	"  - name: staging\n"
	"    context:\n"
	"      cluster: lab\n"
	"      user: lab-admin\n"
	"users:\n"
	"  - name: dev-token\n"
	"    user:\n"
	"      token: " TOKEN "\n"
	"  - name: prod-sa\n"
	"    user:\n"
	"      tokenFile: /var/run/secrets/tokens/retwatch\n"
	"      token: " TOKEN "\n"
	"  - name: lab-admin\n"
	"    user:\n"
	"      client-certificate: certs/admin.crt\n"
	"      client-key: /etc/lab/admin.key\n";

static int parse(const char *text, const char *context, const char *base, struct kube_creds *c,
		 struct rw_error *err)
{
	memset(err, 0, sizeof(*err));
	return kubeconfig__parse(text, strlen(text), context, base, c, err);
}

/* text fails with want and a message holding part, leaving the creds zeroed. */
static bool fails(const char *text, const char *context, int want, const char *part)
{
	static const struct kube_creds zero;
	struct kube_creds c;
	struct rw_error err;
	int ret = parse(text, context, "/base", &c, &err);
	bool ok = CHECK(ret == want, "%d, want %d: %s", ret, want, err.msg) &&
		  ASSERT_STRCONTAINS(err.msg, part) && ASSERT_OK(memcmp(&c, &zero, sizeof(c)));

	kube_creds__free(&c);
	return ok;
}

static bool pem_is(const char *pem, size_t len, const char *want)
{
	return CHECK(pem && len == strlen(want) && !memcmp(pem, want, len), "pem %.*s, want %s",
		     pem ? (int)len : 6, pem ? pem : "(null)", want);
}

TEST(kubeconfig_kind_raw)
{
	struct kube_creds c;
	struct rw_error err;
	bool ok = CHECK(!parse(kind_raw, NULL, NULL, &c, &err), "%s", err.msg) &&
		  ASSERT_STREQ(c.server, "https://127.0.0.1:39953") &&
		  pem_is(c.ca_pem, c.ca_pem_len, CA_PEM) && ASSERT_FALSE(c.ca_file) &&
		  pem_is(c.cert_pem, c.cert_pem_len, CERT_PEM) &&
		  pem_is(c.key_pem, c.key_pem_len, KEY_PEM) && ASSERT_FALSE(c.cert_file) &&
		  ASSERT_FALSE(c.key_file) && ASSERT_FALSE(c.token) && ASSERT_FALSE(c.token_file) &&
		  ASSERT_FALSE(c.insecure) && ASSERT_FALSE(c.namespace);

	kube_creds__free(&c);
	return ok && ASSERT_FALSE(c.server) && ASSERT_EQ(c.ca_pem_len, 0);
}

TEST(kubeconfig_contexts)
{
	struct kube_creds c = {};
	struct rw_error err;
	bool ok;

	/* current-context; a folded CA; the trailing slash dropped */
	ok = CHECK(!parse(multi, NULL, "/home/u/.kube", &c, &err), "%s", err.msg) &&
	     ASSERT_STREQ(c.server, "https://dev.k8s.example.com:6443") &&
	     pem_is(c.ca_pem, c.ca_pem_len, CA_PEM) && ASSERT_STREQ(c.token, TOKEN) &&
	     ASSERT_FALSE(c.token_file) && ASSERT_STREQ(c.namespace, "team-a") &&
	     ASSERT_FALSE(c.insecure);
	kube_creds__free(&c);
	/* relative paths from the kubeconfig's directory; a null namespace */
	ok = ok && CHECK(!parse(multi, "prod", "/home/u/.kube", &c, &err), "%s", err.msg) &&
	     ASSERT_STREQ(c.server, "https://[2001:db8::10]:6443") &&
	     ASSERT_STREQ(c.ca_file, "/home/u/.kube/ca/prod.crt") && ASSERT_FALSE(c.ca_pem) &&
	     ASSERT_STREQ(c.token_file, "/var/run/secrets/tokens/retwatch") &&
	     ASSERT_STREQ(c.token, TOKEN) && ASSERT_FALSE(c.namespace);
	kube_creds__free(&c);
	/* no scheme means https; insecure is reported, not refused, here */
	ok = ok && CHECK(!parse(multi, "staging", "/home/u/.kube", &c, &err), "%s", err.msg) &&
	     ASSERT_STREQ(c.server, "https://lab.internal:6443") && ASSERT_TRUE(c.insecure) &&
	     ASSERT_STREQ(c.cert_file, "/home/u/.kube/certs/admin.crt") &&
	     ASSERT_STREQ(c.key_file, "/etc/lab/admin.key") && ASSERT_FALSE(c.token) &&
	     ASSERT_FALSE(c.ca_pem) && ASSERT_FALSE(c.ca_file);
	kube_creds__free(&c);
	return ok &&
	       fails(multi, "qa", -ENOENT,
		     "kubeconfig: context \"qa\" not found (contexts: dev, prod, staging)") &&
	       /* relative paths need the file's directory */
	       CHECK(parse(multi, "prod", NULL, &c, &err) == -EINVAL, "relative path accepted") &&
	       ASSERT_STRCONTAINS(err.msg, "cluster \"prod-cluster\" certificate-authority "
					   "\"ca/prod.crt\" is a relative path") &&
	       ASSERT_STRCONTAINS(err.msg, "write an absolute path");
}

/* The same file as JSON, which is YAML too. */
TEST(kubeconfig_json)
{
	static const char json[] =
		"{\"kind\":\"Config\",\"apiVersion\":\"v1\",\"current-context\":\"c\","
		"\"clusters\":[{\"name\":\"k\",\"cluster\":{\"server\":\"https://10.0.0.1\","
		"\"certificate-authority-data\":\"" CA_B64 "\"}}],"
		"\"contexts\":[{\"name\":\"c\",\"context\":{\"cluster\":\"k\",\"user\":\"u\","
		"\"namespace\":\"kube-system\"}}],"
		"\"users\":[{\"name\":\"u\",\"user\":{\"token\":\"" TOKEN "\"}}]}";
	struct kube_creds c;
	struct rw_error err;
	bool ok = CHECK(!parse(json, NULL, NULL, &c, &err), "%s", err.msg) &&
		  ASSERT_STREQ(c.server, "https://10.0.0.1") && ASSERT_STREQ(c.token, TOKEN) &&
		  ASSERT_STREQ(c.namespace, "kube-system") &&
		  pem_is(c.ca_pem, c.ca_pem_len, CA_PEM);

	kube_creds__free(&c);
	return ok;
}

/* A kubeconfig with one cluster, context and user, fields spliced in. */
static char *one(const char *cluster, const char *context, const char *user)
{
	char *text = NULL;

	if (asprintf(&text,
		     "clusters:\n- name: k\n  cluster:\n%s"
		     "contexts:\n- name: c\n  context:\n%s"
		     "users:\n- name: u\n  user:\n%s"
		     "current-context: c\n",
		     cluster, context, user) < 0)
		return NULL;
	return text;
}

#define GOOD_CLUSTER "    server: https://k:6443\n"
#define GOOD_CONTEXT "    cluster: k\n    user: u\n"
#define GOOD_USER "    token: " TOKEN "\n"

static bool one_fails(const char *cluster, const char *context, const char *user, int want,
		      const char *part)
{
	char *text = one(cluster, context, user);
	bool ok = ASSERT_TRUE(text) && fails(text, NULL, want, part);

	free(text);
	return ok;
}

static bool one_parses(const char *cluster, const char *context, const char *user,
		       struct kube_creds *c)
{
	char *text = one(cluster, context, user);
	struct rw_error err;
	bool ok = ASSERT_TRUE(text) &&
		  CHECK(!parse(text, NULL, "/base", c, &err), "%s: %s", err.msg, text);

	free(text);
	return ok;
}

TEST(kubeconfig_missing_pieces)
{
	return fails("kind: Config\nclusters: []\n", NULL, -EINVAL,
		     "no current-context: name a context, or set one with kubectl config "
		     "use-context NAME") &&
	       fails("current-context: x\n", NULL, -ENOENT,
		     "context \"x\" not found (contexts: none)") &&
	       fails("current-context: x\ncontexts:\n", NULL, -ENOENT, "(contexts: none)") &&
	       one_fails(GOOD_CLUSTER, "    user: u\n", GOOD_USER, -EINVAL,
			 "context \"c\" names no cluster: set its cluster") &&
	       one_fails(GOOD_CLUSTER, "    cluster: k2\n    user: u\n", GOOD_USER, -ENOENT,
			 "cluster \"k2\" of context \"c\" not found (clusters: k)") &&
	       one_fails(GOOD_CLUSTER, "    cluster: k\n", GOOD_USER, -EINVAL,
			 "context \"c\" names no user: set its user") &&
	       one_fails(GOOD_CLUSTER, "    cluster: k\n    user: v\n", GOOD_USER, -ENOENT,
			 "user \"v\" of context \"c\" not found (users: u)") &&
	       one_fails("    insecure-skip-tls-verify: false\n", GOOD_CONTEXT, GOOD_USER, -EINVAL,
			 "cluster \"k\" has no server: set server: https://HOST:PORT") &&
	       one_fails(GOOD_CLUSTER, GOOD_CONTEXT, "    username: admin\n", -EINVAL,
			 "user \"u\" has no credentials (token, tokenFile, client-certificate and "
			 "client-key; username and password are not supported): add one") &&
	       one_fails(GOOD_CLUSTER, GOOD_CONTEXT, "    token: \"\"\n", -EINVAL,
			 "user \"u\" has no credentials (token, tokenFile, client-certificate") &&
	       one_fails(GOOD_CLUSTER, GOOD_CONTEXT, "    client-certificate-data: " CERT_B64 "\n",
			 -EINVAL,
			 "user \"u\" has a client certificate but no client key: add client-key "
			 "or client-key-data") &&
	       one_fails(GOOD_CLUSTER, GOOD_CONTEXT, "    client-key: k.pem\n", -EINVAL,
			 "has a client key but no client certificate: add client-certificate") &&
	       /* an empty context entry */
	       fails("current-context: c\ncontexts:\n- name: c\n", NULL, -EINVAL,
		     "context \"c\" names no cluster");
}

TEST(kubeconfig_wrong_values)
{
	return one_fails("    server: http://k:8080\n", GOOD_CONTEXT, GOOD_USER, -EINVAL,
			 "cluster \"k\" server \"http://k:8080\" is not https: retwatch sends "
			 "credentials only over https") &&
	       one_fails("    server: https://\n", GOOD_CONTEXT, GOOD_USER, -EINVAL,
			 "has no host") &&
	       one_fails("    server: https:///x\n", GOOD_CONTEXT, GOOD_USER, -EINVAL,
			 "has no host") &&
	       one_fails("    server: \"https://k\\r\\nX-Evil: 1\"\n", GOOD_CONTEXT, GOOD_USER,
			 -EINVAL, "server holds a space or control character: remove it") &&
	       one_fails("    server: [a, b]\n", GOOD_CONTEXT, GOOD_USER, -EINVAL,
			 "cluster \"k\" server is not a string: write it as server: VALUE") &&
	       one_fails(
		       GOOD_CLUSTER "    insecure-skip-tls-verify: maybe\n", GOOD_CONTEXT,
		       GOOD_USER, -EINVAL,
		       "cluster \"k\" insecure-skip-tls-verify is \"maybe\": write true or false") &&
	       one_fails(GOOD_CLUSTER, GOOD_CONTEXT, "    token: \"" TOKEN "\\n\"\n", -EINVAL,
			 "user \"u\" token holds a space or control character") &&
	       one_fails(GOOD_CLUSTER, GOOD_CONTEXT "    namespace: ../../secrets\n", GOOD_USER,
			 -EINVAL,
			 "context \"c\" namespace \"../../secrets\" is not a namespace name") &&
	       one_fails(GOOD_CLUSTER, "    cluster: \"k\\0x\"\n    user: u\n", GOOD_USER, -EINVAL,
			 "context \"c\" cluster holds a NUL character: remove it") &&
	       fails("contexts: {a: b}\ncurrent-context: a\n", NULL, -EINVAL,
		     "contexts is not a list: write it as - name: NAME entries") &&
	       fails("contexts: [a]\ncurrent-context: a\n", NULL, -EINVAL,
		     "contexts[0] is not a mapping: give it name: and context:") &&
	       fails("contexts:\n- name: a\n  context: [x]\ncurrent-context: a\n", NULL, -EINVAL,
		     "context \"a\": context is not a mapping") &&
	       fails("contexts:\n- name: a\n- name: a\ncurrent-context: a\n", NULL, -EINVAL,
		     "two contexts are named \"a\": rename or remove one");
}

TEST(kubeconfig_base64)
{
	struct kube_creds c = {};
	bool ok;

	/* white space and every padding; the PEM check only wants a BEGIN line */
	ok = one_parses(GOOD_CLUSTER "    certificate-authority-data: |\n      LS0tLS1CRUdJ\n"
				     "      TiBBLS0tLS0KeA==\n",
			GOOD_CONTEXT, GOOD_USER, &c) &&
	     pem_is(c.ca_pem, c.ca_pem_len, "-----BEGIN A-----\nx");
	kube_creds__free(&c);
	ok = ok &&
	     one_parses(GOOD_CLUSTER
			"    certificate-authority-data: LS0tLS1CRUdJTiBBLS0tLS0KeHk=\n",
			GOOD_CONTEXT, GOOD_USER, &c) &&
	     pem_is(c.ca_pem, c.ca_pem_len, "-----BEGIN A-----\nxy");
	kube_creds__free(&c);
	ok = ok &&
	     one_parses(GOOD_CLUSTER
			"    certificate-authority-data: LS0tLS1CRUdJTiBBLS0tLS0KeHl6\n"
			"    certificate-authority: /ignored/ca.crt\n",
			GOOD_CONTEXT, GOOD_USER, &c) &&
	     pem_is(c.ca_pem, c.ca_pem_len, "-----BEGIN A-----\nxyz") && ASSERT_FALSE(c.ca_file);
	kube_creds__free(&c);
	return ok &&
	       one_fails(GOOD_CLUSTER "    certificate-authority-data: not*base64\n", GOOD_CONTEXT,
			 GOOD_USER, -EINVAL,
			 "cluster \"k\" certificate-authority-data is not valid base64 (at "
			 "character 4): write the output of base64 -w0 FILE") &&
	       one_fails(GOOD_CLUSTER, GOOD_CONTEXT,
			 "    client-certificate-data: " CERT_B64 "\n"
			 "    client-key-data: LS0tLS1CRUdJTiBBLS0tLS0KeA\n",
			 -EINVAL,
			 "user \"u\" client-key-data is not valid base64 (at character 27)") &&
	       one_fails(GOOD_CLUSTER
			 "    certificate-authority-data: LS0tLS1CRUdJTiBBLS0tLS0KeA=\n",
			 GOOD_CONTEXT, GOOD_USER, -EINVAL, "not valid base64 (at character 28)") &&
	       one_fails(GOOD_CLUSTER
			 "    certificate-authority-data: LS0tLS1CRUdJTiBBLS0tLS0K=A==\n",
			 GOOD_CONTEXT, GOOD_USER, -EINVAL, "not valid base64 (at character 25)") &&
	       one_fails(GOOD_CLUSTER
			 "    certificate-authority-data: LS0tLS1CRUdJTiBBLS0tLS0KeA==LS0t\n",
			 GOOD_CONTEXT, GOOD_USER, -EINVAL, "not valid base64 (at character 29)") &&
	       one_fails(GOOD_CLUSTER "    certificate-authority-data: LS0t=LS0\n", GOOD_CONTEXT,
			 GOOD_USER, -EINVAL, "not valid base64 (at character 5)") &&
	       /* DER, and base64 applied twice */
	       one_fails(GOOD_CLUSTER "    certificate-authority-data: MIIBdzCC\n", GOOD_CONTEXT,
			 GOOD_USER, -EINVAL,
			 "cluster \"k\" certificate-authority-data does not decode to PEM (no "
			 "-----BEGIN line): encode the PEM file once") &&
	       one_fails(
		       GOOD_CLUSTER
		       "    certificate-authority-data: TFMwdExTMUNSVWRKVGlCQkxTMHRMUzBLZUE9PQ==\n",
		       GOOD_CONTEXT, GOOD_USER, -EINVAL, "does not decode to PEM");
}

TEST(kubeconfig_plugins_unsupported)
{
	/* what `aws eks update-kubeconfig` and old `gcloud` write */
	return one_fails(
		       GOOD_CLUSTER, GOOD_CONTEXT,
		       "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
		       "      command: aws\n      args: [eks, get-token, --cluster-name, prod]\n",
		       -EOPNOTSUPP,
		       "user \"u\" gets its credentials from an exec plugin (aws), which the agent "
		       "does not run: give it a token, tokenFile or client certificate") &&
	       one_fails(GOOD_CLUSTER, GOOD_CONTEXT,
			 "    token: " TOKEN "\n    exec:\n      command: gke-gcloud-auth-plugin\n",
			 -EOPNOTSUPP, "exec plugin (gke-gcloud-auth-plugin)") &&
	       one_fails(GOOD_CLUSTER, GOOD_CONTEXT,
			 "    auth-provider:\n      name: gcp\n      config:\n"
			 "        cmd-path: /usr/lib/google-cloud-sdk/bin/gcloud\n",
			 -EOPNOTSUPP,
			 "user \"u\" uses the gcp auth-provider, which retwatch does not support: "
			 "give it a token, tokenFile or client certificate");
}

/* user's text (under users[0].user) parsed as the kubectl plugin does, with exec allowed. */
static int parse_exec(const char *user, struct kube_creds *c, struct rw_error *err)
{
	char *text = one(GOOD_CLUSTER, GOOD_CONTEXT, user);
	int r;

	memset(err, 0, sizeof(*err));
	r = text ? kubeconfig__parse_opts(text, strlen(text), NULL, "/base", KUBECONFIG_EXEC, c,
					  err)
		 : -ENOMEM;
	free(text);
	return r;
}

TEST(kubeconfig_exec_plugin_for_the_kubectl_plugin)
{
	struct kube_creds c;
	struct rw_error err;
	bool ok;

	ok = CHECK(!parse_exec("    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
			       "      command: aws\n"
			       "      args: [eks, get-token, --cluster-name, prod]\n"
			       "      env: [{name: AWS_PROFILE, value: prod}]\n"
			       "      installHint: install the AWS CLI\n",
			       &c, &err),
		   "%s", err.msg) &&
	     ASSERT_TRUE(c.exec) && ASSERT_STREQ(c.exec->command, "aws") &&
	     ASSERT_STREQ(c.exec->argv[0], "aws") && ASSERT_STREQ(c.exec->argv[4], "prod") &&
	     ASSERT_TRUE(!c.exec->argv[5]) && ASSERT_STREQ(c.exec->env[0], "AWS_PROFILE=prod") &&
	     ASSERT_TRUE(!c.exec->env[1]) &&
	     ASSERT_STREQ(c.exec->api_version, "client.authentication.k8s.io/v1beta1") &&
	     ASSERT_STREQ(c.exec->install_hint, "install the AWS CLI") &&
	     ASSERT_STREQ(c.exec->server, "https://k:6443") && ASSERT_TRUE(!c.token);
	kube_creds__free(&c);
	/* a path is the kubeconfig's directory's, as kubectl reads it */
	ok = ok &&
	     CHECK(!parse_exec("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
			       "      command: bin/login\n",
			       &c, &err),
		   "%s", err.msg) &&
	     ASSERT_STREQ(c.exec->command, "/base/bin/login");
	kube_creds__free(&c);
	ok = ok && ASSERT_EQ(parse_exec("    exec:\n      command: aws\n", &c, &err), -EINVAL) &&
	     ASSERT_STRCONTAINS(err.msg, "exec apiVersion is unset: write "
					 "client.authentication.k8s.io/v1");
	ok = ok &&
	     ASSERT_EQ(parse_exec("    exec:\n      apiVersion: "
				  "client.authentication.k8s.io/v1\n      args: [x]\n",
				  &c, &err),
		       -EINVAL) &&
	     ASSERT_STRCONTAINS(err.msg, "exec has no command");
	ok = ok &&
	     ASSERT_EQ(parse_exec("    exec:\n      apiVersion: "
				  "client.authentication.k8s.io/v1\n      command: x\n"
				  "      args: {a: b}\n",
				  &c, &err),
		       -EINVAL) &&
	     ASSERT_STRCONTAINS(err.msg, "exec args is not a list");
	return ok;
}

TEST(kubeconfig_exec_credential)
{
	const char *v1 = "client.authentication.k8s.io/v1";
	struct rw_error err = {};
	time_t expiry;
	char *tok;
	bool ok;

	ok = ASSERT_OK(kube_exec__parse(
		     "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
		     "\"ExecCredential\",\"status\":{\"token\":\"abc.def\","
		     "\"expirationTimestamp\":\"2030-01-02T03:04:05Z\"}}",
		     SIZE_MAX, v1, &tok, &expiry, &err)) &&
	     ASSERT_STREQ(tok, "abc.def") && ASSERT_EQ(expiry, (time_t)1893553445);
	free(tok);
	ok = ok &&
	     ASSERT_EQ(kube_exec__parse("{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
					"\"kind\":\"ExecCredential\",\"status\":{\"token\":\"a\"}}",
					SIZE_MAX, v1, &tok, &expiry, &err),
		       -EINVAL) &&
	     ASSERT_STRCONTAINS(err.msg, "apiVersion is client.authentication.k8s.io/v1beta1");
	ok = ok &&
	     ASSERT_EQ(kube_exec__parse("{\"apiVersion\":\"client.authentication.k8s.io/v1\","
					"\"kind\":\"ExecCredential\",\"status\":{"
					"\"clientCertificateData\":\"x\"}}",
					SIZE_MAX, v1, &tok, &expiry, &err),
		       -EOPNOTSUPP) &&
	     ASSERT_STRCONTAINS(err.msg, "client certificate");
	ok = ok &&
	     ASSERT_EQ(kube_exec__parse("{\"apiVersion\":\"client.authentication.k8s.io/v1\","
					"\"kind\":\"ExecCredential\",\"status\":{\"token\":"
					"\"a b\"}}",
					SIZE_MAX, v1, &tok, &expiry, &err),
		       -EINVAL) &&
	     ASSERT_STRCONTAINS(err.msg, "space or control character");
	ok = ok && ASSERT_EQ(kube_exec__parse("not json", 8, v1, &tok, &expiry, &err), -EINVAL);
	return ok && ASSERT_TRUE(!tok);
}

TEST(kubeconfig_hostile_yaml)
{
	static const char laughs[] = "a: &a [x, x, x, x, x, x, x, x, x]\n"
				     "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
				     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
				     "current-context: *c\n";
	size_t big_len = KUBECONFIG_MAX + 1, deep_len = 2 * 1000 + 1;
	char *big = malloc(big_len), *deep = malloc(deep_len), *many;
	struct kube_creds c;
	struct rw_error err;
	bool ok = ASSERT_TRUE(big && deep);

	if (ok) {
		memset(big, '#', big_len);
		ok = CHECK(kubeconfig__parse(big, big_len, NULL, NULL, &c, &err) == -EFBIG, "%s",
			   err.msg) &&
		     ASSERT_STRCONTAINS(err.msg, "over the limit");
		memset(deep, '[', 1000);
		memset(deep + 1000, ']', 1000);
		deep[2000] = '\0';
	}
	/* [a,a,...]: one node each */
	many = ok ? malloc(2 * 100001 + 3) : NULL;
	for (size_t i = 0; many && i < 100001; i++)
		memcpy(many + 1 + 2 * i, "a,", 2);
	if (many) {
		many[0] = '[';
		memcpy(many + 1 + 2 * 100001, "]", 2);
	}
	ok = ok && fails(laughs, NULL, -EINVAL, "line 2: aliases (*name) are not supported") &&
	     fails("a: &x 1\ncurrent-context: *x\n", NULL, -EINVAL, "aliases") &&
	     fails(deep, NULL, -EINVAL, "line 1: nested over 32 levels deep: not a kubeconfig") &&
	     ASSERT_TRUE(many) && fails(many, NULL, -EINVAL, "yaml nodes: not a kubeconfig") &&
	     fails("", NULL, -EINVAL, "the file is empty") &&
	     fails("# nothing\n", NULL, -EINVAL, "the file is empty") &&
	     fails("~\n", NULL, -EINVAL, "the file is empty") &&
	     fails("- a\n- b\n", NULL, -EINVAL, "the top level is not a mapping") &&
	     fails("clusters:\n  - name: a\n   bad: indent\n", NULL, -EINVAL,
		   "not valid yaml at line 3 column 4") &&
	     fails("a: \"\x01\"\n", NULL, -EINVAL, "not valid yaml") &&
	     CHECK(kubeconfig__parse("a: b\0c: d", 9, NULL, NULL, &c, &err) == -EINVAL, "NUL ok");
	free(many);
	free(big);
	free(deep);
	return ok;
}

static bool put(const char *dir, const char *name, const char *text)
{
	return test__write_file(dir, name, text, strlen(text));
}

TEST(kubeconfig_load)
{
	char dir[] = "/tmp/retwatch-kube-XXXXXX", path[64], missing[64], want[256];
	struct kube_creds c = {};
	struct rw_error err;
	bool ok;

	if (!ASSERT_TRUE(mkdtemp(dir)))
		return false;
	snprintf(path, sizeof(path), "%s/config", dir);
	snprintf(missing, sizeof(missing), "%s/nope", dir);
	snprintf(want, sizeof(want), "%s/ca/prod.crt", dir);
	ok = put(dir, "config", multi) &&
	     CHECK(!kubeconfig__load(path, "prod", &c, &err), "%s", err.msg) &&
	     ASSERT_STREQ(c.ca_file, want);
	kube_creds__free(&c);
	snprintf(want, sizeof(want), "kubeconfig %s: context \"x\" not found (contexts: dev,",
		 path);
	ok = ok && ASSERT_EQ(kubeconfig__load(path, "x", &c, &err), -ENOENT) &&
	     ASSERT_STRCONTAINS(err.msg, want) && ASSERT_FALSE(c.server);
	snprintf(want, sizeof(want), "failed to read kubeconfig %s: No such file", missing);
	ok = ok && ASSERT_EQ(kubeconfig__load(missing, NULL, &c, &err), -ENOENT) &&
	     ASSERT_STRCONTAINS(err.msg, want) &&
	     ASSERT_EQ(kubeconfig__load(dir, NULL, &c, NULL), -EISDIR);
	test__rm_tree(dir);
	return ok;
}

/* Sets or (value NULL) unsets an environment variable, returning the old value to restore. */
static char *swap_env(const char *name, const char *value)
{
	const char *old = getenv(name);
	char *saved = old ? strdup(old) : NULL;

	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
	return saved;
}

static bool in_cluster(const char *sa, const char *host, const char *port, int want,
		       const char *server_or_msg, struct kube_creds *c)
{
	char *old_host = swap_env("KUBERNETES_SERVICE_HOST", host);
	char *old_port = swap_env("KUBERNETES_SERVICE_PORT", port);
	struct rw_error err = {};
	int ret = kubeconfig__in_cluster(sa, c, &err);
	bool ok = CHECK(ret == want, "%d, want %d: %s", ret, want, err.msg) &&
		  (ret ? ASSERT_STRCONTAINS(err.msg, server_or_msg)
		       : ASSERT_STREQ(c->server, server_or_msg));

	free(swap_env("KUBERNETES_SERVICE_HOST", old_host));
	free(swap_env("KUBERNETES_SERVICE_PORT", old_port));
	free(old_host);
	free(old_port);
	return ok;
}

TEST(kubeconfig_in_cluster)
{
	char sa[] = "/tmp/retwatch-sa-XXXXXX", want[64];
	struct kube_creds c = {};
	bool ok;

	if (!ASSERT_TRUE(mkdtemp(sa)))
		return false;
	ok = put(sa, "token", TOKEN) && put(sa, "ca.crt", CA_PEM) &&
	     put(sa, "namespace", "monitoring\n") &&
	     in_cluster(sa, "10.96.0.1", "443", 0, "https://10.96.0.1:443", &c);
	snprintf(want, sizeof(want), "%s/token", sa);
	ok = ok && ASSERT_STREQ(c.token_file, want) && ASSERT_STREQ(c.namespace, "monitoring") &&
	     ASSERT_FALSE(c.token) && ASSERT_FALSE(c.insecure);
	snprintf(want, sizeof(want), "%s/ca.crt", sa);
	ok = ok && ASSERT_STREQ(c.ca_file, want);
	kube_creds__free(&c);
	ok = ok && in_cluster(sa, "fd00:10:96::1", "6443", 0, "https://[fd00:10:96::1]:6443", &c);
	kube_creds__free(&c);
	ok = ok && in_cluster(sa, NULL, "443", -ENOENT, "not in a pod", &c) &&
	     in_cluster(sa, "10.96.0.1", "", -ENOENT, "pass a kubeconfig", &c) &&
	     in_cluster(sa, "10.96.0.1", "https", -EINVAL,
			"KUBERNETES_SERVICE_PORT \"https\" is not a port number", &c) &&
	     in_cluster(sa, "10.96.0.1", "65536", -EINVAL, "not a port number", &c) &&
	     in_cluster(sa, "evil/x?", "443", -EINVAL, "is not a host name or address", &c) &&
	     put(sa, "namespace", "../kube-system") &&
	     in_cluster(sa, "10.96.0.1", "443", -EINVAL, "not a namespace name", &c);
	snprintf(want, sizeof(want), "%s/namespace", sa);
	ok = ok && ASSERT_OK(unlink(want)) && in_cluster(sa, "k", "443", 0, "https://k:443", &c) &&
	     ASSERT_FALSE(c.namespace);
	kube_creds__free(&c);
	snprintf(want, sizeof(want), "%s/token", sa);
	ok = ok && ASSERT_OK(unlink(want)) &&
	     in_cluster(sa, "k", "443", -ENOENT, "automountServiceAccountToken", &c) &&
	     ASSERT_FALSE(c.server);
	test__rm_tree(sa);
	kube_creds__free(NULL);
	return ok;
}

/* What an error response says in the log: a Status's message, else the body's start. */
TEST(kube_error_text)
{
	char buf[64], big[1000];
	bool ok = true;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	ok = ok && ASSERT_STREQ(kube__error_text("{\"kind\":\"Status\",\"message\":\"node "
						 "\\\"b\\\" is not yours\"}",
						 buf, sizeof(buf)),
				"node \"b\" is not yours");
	ok = ok && ASSERT_STREQ(kube__error_text("<html>bad gateway</html>", buf, sizeof(buf)),
				"<html>bad gateway</html>");
	ok = ok &&
	     ASSERT_STREQ(kube__error_text("{\"message\":7}", buf, sizeof(buf)), "{\"message\":7}");
	ok = ok && ASSERT_STREQ(kube__error_text(NULL, buf, sizeof(buf)), "");
	ok = ok && ASSERT_EQ(strlen(kube__error_text(big, buf, sizeof(buf))), sizeof(buf) - 1);
	return ok;
}
