// SPDX-License-Identifier: MIT
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <string.h>

#include "base/latency.h"
#include "plugin/cli.h"

const char plugin_cli__usage[] =
	"Usage:\n"
	"  kubectl retwatch trace (deploy/NAME | sts/NAME | ds/NAME | pod/NAME | -l SELECTOR)\n"
	"      PATTERN... [--for 2m] [--threshold 50ms] [--interval 2s] [--args] [--keep]\n"
	"      [-o wide] [-n NS | -A]\n"
	"    Times every call of the functions PATTERN names (Go names such as main.handle,\n"
	"    C symbols, globs, LIB:NAME) in the pods, with a FunctionProbe made for it;\n"
	"    shows the results live and deletes the probe when --for ends or on Ctrl-C\n"
	"    (unless --keep). --threshold: calls at least this slow are logged with their\n"
	"    stack by the agents. --interval: how often nodes report (at least 2s).\n"
	"    --args: the slowest calls show their arguments (spec.captureArguments).\n"
	"    -A (with -l): the pods of every namespace, with a ClusterFunctionProbe.\n"
	"  kubectl retwatch functions (deploy/NAME | sts/NAME | ds/NAME | pod/NAME |\n"
	"      -l SELECTOR) [PATTERN...] [--timeout 30s] [-o json|wide] [-n NS]\n"
	"    Lists the functions the pods' executables offer (and their shared libraries'\n"
	"    for LIB:NAME patterns) that PATTERN matches, every one without a pattern, at\n"
	"    most 1000 per executable: the names to trace. The agents read the files; no\n"
	"    probe is attached, and the FunctionProbe asking them is deleted at the end.\n"
	"    --timeout: how long the agents on the pods' nodes have to answer.\n"
	"  kubectl retwatch get [NAME] [-o json|yaml|wide] [-n NS | -A]\n"
	"    The FunctionProbes of the namespace, or one with its functions; with -A,\n"
	"    the ClusterFunctionProbes, with a row per namespace.\n"
	"  kubectl retwatch top [-o json|yaml|wide] [-n NS | -A]\n"
	"    Every function of every probe of the namespace, the slowest (p99) first.\n"
	"Tables cut a long name with \"…\" to keep their columns; -o wide prints names\n"
	"whole, each column as wide as its longest.\n"
	"Options of every command: --kubeconfig FILE, --context NAME, -n/--namespace NS\n"
	"(defaults: $KUBECONFIG or ~/.kube/config, its current context and namespace).\n";

static const struct {
	const char *names[5];
	enum plugin_kind kind;
} kinds[] = {
	{ { "po", "pod", "pods" }, PLUGIN_KIND_POD },
	{ { "deploy", "deployment", "deployments", "deployment.apps", "deployments.apps" },
	  PLUGIN_KIND_DEPLOY },
	{ { "sts", "statefulset", "statefulsets", "statefulset.apps", "statefulsets.apps" },
	  PLUGIN_KIND_STS },
	{ { "ds", "daemonset", "daemonsets", "daemonset.apps", "daemonsets.apps" },
	  PLUGIN_KIND_DS },
};

enum plugin_kind plugin_kind__parse(const char *kind, size_t len)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		for (size_t j = 0; j < 5 && kinds[i].names[j]; j++)
			if (strlen(kinds[i].names[j]) == len &&
			    !strncmp(kinds[i].names[j], kind, len))
				return kinds[i].kind;
	return PLUGIN_KIND_NONE;
}

const char *plugin_kind__name(enum plugin_kind k)
{
	static const char *n[] = { "", "pod", "deployment", "statefulset", "daemonset" };

	return n[k];
}

const char *plugin_kind__resource(enum plugin_kind k)
{
	static const char *n[] = { "", "pods", "deployments", "statefulsets", "daemonsets" };

	return n[k];
}

const char *plugin_kind__api(enum plugin_kind k)
{
	return k == PLUGIN_KIND_POD ? "/api/v1" : "/apis/apps/v1";
}

/* A duration flag: as the CRD's pattern has it (units needed), above zero. */
static int duration(const char *flag, const char *s, uint64_t *ret_ns, struct rw_error *err)
{
	uint64_t ns = 0;

	if (latency__parse_duration(s, &ns) || !ns || !strpbrk(s, "nsuµmh"))
		return rw_error_set(err, EINVAL,
				    "--%s %s: give a duration above zero with its unit, such as "
				    "30s, 2m or 1m30s",
				    flag, s);
	if (ret_ns)
		*ret_ns = ns;
	return 0;
}

static int set_output(const char *o, struct plugin_cli *c, struct rw_error *err)
{
	if (!strcmp(o, "json"))
		c->output = PLUGIN_OUT_JSON;
	else if (!strcmp(o, "yaml"))
		c->output = PLUGIN_OUT_YAML;
	else if (!strcmp(o, "wide"))
		c->output = PLUGIN_OUT_WIDE;
	else
		return rw_error_set(err, EINVAL, "-o %s: the outputs are json, yaml and wide", o);
	return 0;
}

enum {
	OPT_KUBECONFIG = 256,
	OPT_CONTEXT,
	OPT_FOR,
	OPT_THRESHOLD,
	OPT_INTERVAL,
	OPT_KEEP,
	OPT_ARGS,
	OPT_TIMEOUT
};

static const struct option long_opts[] = {
	{ "namespace", required_argument, NULL, 'n' },
	{ "selector", required_argument, NULL, 'l' },
	{ "all-namespaces", no_argument, NULL, 'A' },
	{ "output", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, 'h' },
	{ "kubeconfig", required_argument, NULL, OPT_KUBECONFIG },
	{ "context", required_argument, NULL, OPT_CONTEXT },
	{ "for", required_argument, NULL, OPT_FOR },
	{ "threshold", required_argument, NULL, OPT_THRESHOLD },
	{ "interval", required_argument, NULL, OPT_INTERVAL },
	{ "keep", no_argument, NULL, OPT_KEEP },
	{ "args", no_argument, NULL, OPT_ARGS },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ 0 },
};

static int one_opt(int o, const char *arg, struct plugin_cli *c, struct rw_error *err)
{
	switch (o) {
	case 'n': c->ns = arg; return 0;
	case 'l': c->selector = arg; return 0;
	case 'A': c->all_ns = true; return 0;
	case 'o': return set_output(arg, c, err);
	case 'h': c->cmd = PLUGIN_HELP; return 0;
	case OPT_KUBECONFIG: c->kubeconfig = arg; return 0;
	case OPT_CONTEXT: c->context = arg; return 0;
	case OPT_FOR: c->lifetime = arg; return duration("for", arg, &c->lifetime_ns, err);
	case OPT_THRESHOLD: c->threshold = arg; return duration("threshold", arg, NULL, err);
	case OPT_INTERVAL: {
		uint64_t ns;

		c->interval = arg;
		if (duration("interval", arg, &ns, err))
			return -EINVAL;
		return ns < 2000000000ull ? rw_error_set(err, EINVAL,
							 "--interval %s: nodes report at most "
							 "every 2s; give 2s or more",
							 arg)
					  : 0;
	}
	case OPT_KEEP: c->keep = true; return 0;
	case OPT_ARGS: c->args = true; return 0;
	case OPT_TIMEOUT: c->timeout = arg; return duration("timeout", arg, &c->timeout_ns, err);
	}
	return rw_error_set(err, EINVAL, "unknown option (kubectl retwatch --help lists them)");
}

static int parse_opts(int argc, char **argv, struct plugin_cli *c, struct rw_error *err)
{
	int o;

	optind = 0; /* GNU: start afresh (permuting, so options may follow arguments) */
	opterr = 0;
	while ((o = getopt_long(argc, argv, "n:l:o:hA", long_opts, NULL)) != -1) {
		if (o == '?' || o == ':') {
			const char *bad = argv[optind - 1];

			return rw_error_set(err, EINVAL,
					    "%s: %s (kubectl retwatch --help lists the options)",
					    bad ? bad : "?",
					    o == ':' || optopt ? "unknown option or missing value"
							       : "unknown option");
		}
		if (one_opt(o, optarg, c, err))
			return -EINVAL;
	}
	return 0;
}

/* KIND/NAME, the first argument of trace when -l is not given. */
static int target(const char *arg, struct plugin_cli *c, struct rw_error *err)
{
	const char *slash = strchr(arg, '/');

	if (!slash || !slash[1] || strchr(slash + 1, '/'))
		return rw_error_set(
			err, EINVAL,
			"%s: name the pods as deploy/NAME, sts/NAME, ds/NAME or pod/NAME, "
			"or give a label selector with -l",
			arg);
	c->kind = plugin_kind__parse(arg, (size_t)(slash - arg));
	if (c->kind == PLUGIN_KIND_NONE)
		return rw_error_set(err, EINVAL,
				    "%.*s: the kinds are deploy, sts, ds and pod (or -l SELECTOR)",
				    (int)(slash - arg), arg);
	c->name = slash + 1;
	return 0;
}

static int trace_args(int n, char **args, struct plugin_cli *c, struct rw_error *err)
{
	const char *cmd = c->cmd == PLUGIN_FUNCTIONS ? "functions" : "trace";
	int i = 0;

	if (c->all_ns && (c->cmd == PLUGIN_FUNCTIONS || !c->selector))
		return rw_error_set(
			err, EINVAL, "%s -A: %s", cmd,
			c->cmd == PLUGIN_FUNCTIONS
				? "functions reads one namespace's pods: give -n NS"
				: "a workload is one namespace's; select the pods of every "
				  "namespace with -l SELECTOR");
	if (!c->selector) {
		if (!n)
			return rw_error_set(err, EINVAL,
					    "%s: name the pods (deploy/NAME, sts/NAME, ds/NAME, "
					    "pod/NAME or -l SELECTOR)%s",
					    cmd,
					    c->cmd == PLUGIN_TRACE ? " and the functions" : "");
		if (target(args[i++], c, err))
			return -EINVAL;
	}
	if (c->cmd == PLUGIN_FUNCTIONS && c->output == PLUGIN_OUT_YAML)
		return rw_error_set(err, EINVAL,
				    "functions: -o json or -o wide, or a table without -o");
	if (c->cmd == PLUGIN_TRACE && c->output > PLUGIN_OUT_WIDE)
		return rw_error_set(err, EINVAL,
				    "trace prints tables: -o wide, or none (get NAME -o %s "
				    "prints the probe)",
				    c->output == PLUGIN_OUT_JSON ? "json" : "yaml");
	if (i == n && c->cmd == PLUGIN_FUNCTIONS)
		return 0; /* every function */
	if (i == n)
		return rw_error_set(
			err, EINVAL,
			"trace: name the functions to time, such as 'main.(*Server).Handle' "
			"or 'main.*'");
	if (n - i > PLUGIN_MAX_PATTERNS)
		return rw_error_set(err, EINVAL, "%s: %d patterns; a probe takes at most %d", cmd,
				    n - i, PLUGIN_MAX_PATTERNS);
	for (; i < n; i++) {
		if (!*args[i] || strlen(args[i]) > 1024)
			return rw_error_set(err, EINVAL,
					    "%s: a function pattern is 1 to 1024 characters", cmd);
		c->patterns[c->npatterns++] = args[i];
	}
	return 0;
}

/* Whether option arg takes the next argument as its value. */
static bool takes_value(const char *arg)
{
	if (arg[1] != '-')
		return arg[1] && strchr("nlo", arg[1]) && !arg[2];
	for (const struct option *o = long_opts; o->name; o++)
		if (o->has_arg == required_argument && !strcmp(arg + 2, o->name))
			return true;
	return false;
}

/* Moves the command (the first argument that is no option nor an option's
 * value) to argv[1]: `kubectl retwatch -n shop get` as `get -n shop`.
 * Returns the command, "help" when there is none and -h asks for it, else
 * NULL. */
static const char *command_first(int argc, char **argv)
{
	bool help = argc < 2;

	for (int i = 1; i < argc; i++) {
		char *cmd = argv[i];

		if (!strcmp(cmd, "--"))
			break;
		if (cmd[0] == '-' && cmd[1]) {
			help = help || !strcmp(cmd, "-h") || !strcmp(cmd, "--help");
			i += takes_value(cmd);
			continue;
		}
		memmove(argv + 2, argv + 1, (size_t)(i - 1) * sizeof(*argv));
		argv[1] = cmd;
		return cmd;
	}
	return help ? "help" : NULL;
}

int plugin_cli__parse(int argc, char **argv, struct plugin_cli *c, struct rw_error *err)
{
	const char *cmd;
	int n;

	*c = (struct plugin_cli){ .lifetime = "2m",
				  .lifetime_ns = 120000000000ull,
				  .interval = "2s",
				  .timeout = "30s",
				  .timeout_ns = 30000000000ull };
	if (!(cmd = command_first(argc, argv)))
		return rw_error_set(err, EINVAL,
				    "give a command: trace, functions, get or top (or --help)");

	if (!strcmp(cmd, "trace"))
		c->cmd = PLUGIN_TRACE;
	else if (!strcmp(cmd, "functions"))
		c->cmd = PLUGIN_FUNCTIONS;
	else if (!strcmp(cmd, "get"))
		c->cmd = PLUGIN_GET;
	else if (!strcmp(cmd, "top"))
		c->cmd = PLUGIN_TOP;
	else if (!strcmp(cmd, "help") || !strcmp(cmd, "-h") || !strcmp(cmd, "--help"))
		return 0;
	else
		return rw_error_set(
			err, EINVAL,
			"%s: unknown command; the commands are trace, functions, get and top", cmd);
	if (parse_opts(argc - 1, argv + 1, c, err))
		return -EINVAL;
	if (c->cmd == PLUGIN_HELP)
		return 0;
	n = argc - 1 - optind;
	argv += 1 + optind;
	if (c->all_ns && c->ns)
		return rw_error_set(err, EINVAL,
				    "-A and -n: give one (-A: every namespace, -n: one)");
	if (c->cmd == PLUGIN_TRACE || c->cmd == PLUGIN_FUNCTIONS)
		return trace_args(n, argv, c, err);
	if (c->selector)
		return rw_error_set(err, EINVAL, "-l is for trace and functions only");
	if (c->cmd == PLUGIN_TOP && n)
		return rw_error_set(err, EINVAL, "top takes no arguments: give -n NS");
	if (c->cmd == PLUGIN_GET && n > 1)
		return rw_error_set(err, EINVAL, "get takes one probe name at most");
	c->name = n ? argv[0] : NULL;
	return 0;
}
