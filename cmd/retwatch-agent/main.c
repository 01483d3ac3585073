// SPDX-License-Identifier: MIT
/*
 * retwatch-agent: the per-node agent. Watches FunctionProbes and this node's
 * pods, probes the selected processes, writes results into each probe's
 * status. Logs JSON lines on stderr.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/keepshare.h"
#include "trace/callargs.h"
#include "analysis/analyzer.h"
#include "analysis/debugfile.h"
#include "base/clock.h"
#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "base/latency.h"
#include "base/log.h"
#include "agent/http/metrics.h"
#include "agent/http/metricsauth.h"
#include "agent/http/metricstls.h"
#include "base/openfiles.h"
#include "base/overlay.h"
#include "report/reportfit.h"
#include "selfcheck.h"

#ifndef RETWATCH_VERSION
#define RETWATCH_VERSION "0.1.0"
#endif

#define DEFAULT_METRICS_ADDRESS ":9431"
#define DEFAULT_MAX_PROBES 100
#define DEFAULT_MAX_SERIES 5000
#define DEFAULT_REPORT_WRITES 50
#define DEFAULT_MAX_NS_FUNCS 8192
/* an eighth of the in-flight map each: 8 namespaces at their share fit */
#define DEFAULT_NS_INFLIGHT (TRACER_MAX_CONTEXTS / 8)
#define DEFAULT_NS_SLOW_CALLS 500
#define DEFAULT_CALIBRATE_EVERY_NS (600 * NS_PER_S)
/* a quarter of the chart's memory limit (256Mi): two big Go files, or a
 * dozen C programs with their debug files */
#define DEFAULT_ANALYSIS_CACHE_BYTES ((size_t)64 << 20)
#define DEFAULT_ANALYSIS_MAX_BYTES ((size_t)96 << 20)

static volatile sig_atomic_t exiting, stats_wanted;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		stats_wanted = 1;
	else
		exiting = 1;
}

/* The synopsis and what the agent does. */
static void usage_synopsis(FILE *f)
{
	fprintf(f,
		"usage: retwatch-agent [--kubeconfig FILE [--context NAME]] [--node-name NODE]\n"
		"                      [--lease-namespace NS] [--log-level LEVEL]\n"
		"                      [--attach auto|uprobe_multi|perf_event]\n"
		"                      [--returns trampoline|ret]\n"
		"                      [--metrics-address ADDR:PORT|none] [--max-probes N]\n"
		"                      [--health-address ADDR:PORT|none]\n"
		"                      [--metrics-auth kube|none]\n"
		"                      [--metrics-tls self-signed|none]\n"
		"                      [--metrics-tls-cert FILE --metrics-tls-key FILE]\n"
		"                      [--metrics-max-series N] [--report-writes-per-second N]\n"
		"                      [--report-budget BYTES]\n"
		"                      [--slow-calls-per-second N]\n"
		"                      [--max-functions-per-namespace N]\n"
		"                      [--max-inflight-per-namespace N]\n"
		"                      [--slow-calls-per-namespace N] [--layer-root DIR...]\n"
		"                      [--max-kept-bytes-per-namespace BYTES]\n"
		"                      [--max-kept-bytes BYTES]\n"
		"                      [--list-page-size N] [--analysis-timeout DURATION]\n"
		"                      [--analysis-cache-bytes BYTES] [--analysis-max-bytes BYTES]\n"
		"                      [--calibrate-every DURATION]\n"
		"                      [--argument-capture allow|deny]\n"
		"                      [--redact NAME...] [--no-redact]\n"
		"                      [--debug-dir DIR...]\n"
		"       retwatch-agent --self-check | --version\n"
		"\n"
		"Probes the functions named by FunctionProbe resources (retwatch.io/v1alpha1)\n"
		"in the pods of this node and writes their latency into a FunctionProbeReport\n"
		"per probe and node; the agent holding the Lease merges them into each\n"
		"probe's status.\n"
		"\n");
}

/* The options of the API server, the node, logging, attaching and /metrics. */
static void usage_connections(FILE *f)
{
	fprintf(f,
		"  --kubeconfig FILE      reach the API server as this kubeconfig says; without\n"
		"                         it, the pod's service account is used\n"
		"  --context NAME         kubeconfig context (default: its current-context)\n"
		"  --node-name NODE       this node's name (default: $NODE_NAME)\n"
		"  --lease-namespace NS   namespace of the Lease that elects the summary writer\n"
		"                         (default: $POD_NAMESPACE, else the kubeconfig's or\n"
		"                         service account's namespace, else retwatch)\n"
		"  --log-level LEVEL      debug, info (default), warn or error\n"
		"  --attach MODE          how uprobes attach (default auto)\n"
		"  --returns MODE         trampoline (default): a call of a function that\n"
		"                         calls nothing ends at the kernel's return\n"
		"                         trampoline where that is safe (Linux 6.14+), at\n"
		"                         less cost, every other at probes on its RETs;\n"
		"                         ret: every call ends at probes on its RETs\n"
		"  --metrics-address A    serve /metrics (Prometheus), /healthz and /readyz on\n"
		"                         A, such as :9431 (the default), 127.0.0.1:9431 or\n"
		"                         [::1]:9431; none serves nothing\n"
		"  --health-address A     serve /healthz and /readyz on A too, from a listener\n"
		"                         of their own that clients of /metrics cannot use\n"
		"                         up (the kubelet's probes); default none\n"
		"  --metrics-auth MODE    kube (the default): /metrics answers only a bearer\n"
		"                         token whose user the API server's TokenReview and\n"
		"                         SubjectAccessReview allow to get /metrics; none:\n"
		"                         anyone who reaches the port\n"
		"  --metrics-tls MODE     self-signed (the default): /metrics is served over\n"
		"                         TLS only, with a certificate the agent makes at\n"
		"                         start (encrypted, not verifiable); none: plain HTTP\n"
		"  --metrics-tls-cert FILE, --metrics-tls-key FILE\n"
		"                         serve /metrics over TLS with this PEM certificate\n"
		"                         (chain) and its private key instead (a Secret's\n"
		"                         tls.crt and tls.key); the health listener stays\n"
		"                         plain HTTP\n"
		"  --max-probes N         trace at most N probes at once on this node; others\n"
		"                         wait, with an error in their status (default 100;\n"
		"                         0: no limit)\n"
		"  --metrics-max-series N export at most N per-function series (default 5000;\n"
		"                         0: no limit); retwatch_metrics_series_dropped counts\n"
		"                         the rest\n");
}

/* The bounds on reading the traced files. */
static void usage_analysis(FILE *f)
{
	fprintf(f, "  --analysis-timeout DURATION\n"
		   "                         reading one executable or library (its symbols,\n"
		   "                         tables and the functions probed) may take this\n"
		   "                         long, off the main loop; past it the process is not\n"
		   "                         traced, with an error (default 5s)\n"
		   "  --analysis-cache-bytes BYTES\n"
		   "                         analyses of files no process runs now, kept for the\n"
		   "                         next, hold at most BYTES; the least recently used go\n"
		   "                         first (default 64Mi; 0: no limit but 64 files)\n"
		   "  --analysis-max-bytes BYTES\n"
		   "                         all analyses together hold at most BYTES: those\n"
		   "                         unused go first; a file whose analysis would take\n"
		   "                         those in use over it is not traced, with an error\n"
		   "                         (default 96Mi; 0: no limit)\n");
}

/* The limits the agent keeps to on the node and the cluster, and the rest. */
static void usage_limits(FILE *f)
{
	fprintf(f,
		"  --report-writes-per-second N\n"
		"                         the reports of one probe take at most N writes a\n"
		"                         second across the cluster: nodes write less often\n"
		"                         than spec.reportInterval when many report (default\n"
		"                         50; 0: no limit; read from the summary writer)\n"
		"  --debug-dir DIR        look for stripped files' debug files under DIR of\n"
		"                         the agent's own filesystem (a node directory the\n"
		"                         chart's debugDirs mounts) before /usr/lib/debug\n"
		"  --argument-capture allow|deny\n"
		"                         whether a probe's spec.captureArguments may have\n"
		"                         its calls' arguments read and reported (default\n"
		"                         allow; deny: such a probe is traced without them,\n"
		"                         and its status says why)\n"
		"  --report-budget BYTES  a probe's report of this node, and a probe's status,\n"
		"                         stay under BYTES (such as 1Mi, 512Ki or 1048576;\n"
		"                         default 1Mi, at least 32Ki): past it, each function\n"
		"                         keeps its slowest pods and folds the rest into a row\n"
		"                         per revision; etcd refuses objects past its\n"
		"                         --max-request-bytes (1.5Mi by default)\n"
		"  --slow-calls-per-second N\n"
		"                         the kernel sends at most N slow calls a second per\n"
		"                         function and process on each CPU, and the agent logs\n"
		"                         at most N a second per probe; the rest are counted\n"
		"                         (default %d; 0: no limit)\n"
		"  --max-functions-per-namespace N\n"
		"                         the probes of one namespace trace at most N functions\n"
		"                         on this node, each counted once per process; a process\n"
		"                         past it is not traced, with an error (default %d;\n"
		"                         0: no limit)\n"
		"  --max-inflight-per-namespace N\n"
		"                         the processes of one namespace have at most N\n"
		"                         goroutines and threads with traced calls in flight\n"
		"                         on this node (of the %d the kernel holds); calls\n"
		"                         past it are lost, counted, with an error (default\n"
		"                         %d; 0: no limit)\n"
		"  --slow-calls-per-namespace N\n"
		"                         the kernel sends at most N slow calls a second for\n"
		"                         the processes of one namespace, over every CPU; the\n"
		"                         rest are counted (default %d; 0: no limit)\n"
		"  --redact NAME          a captured argument whose parameter's name holds NAME\n"
		"                         (case and _-. ignored) is reported without its value,\n"
		"                         as those named as secrets are (password, secret, token,\n"
		"                         apikey, credential, cookie, session, auth...);\n"
		"                         repeatable\n"
		"  --no-redact            report every captured value, secrets included\n"
		"  --max-kept-bytes-per-namespace BYTES\n"
		"                         the slowest calls the probes of one namespace keep\n"
		"                         (spec.slowCalls) hold at most BYTES of memory; a\n"
		"                         call past it is not kept, with an error (default\n"
		"                         16Mi; 0: no limit)\n"
		"  --max-kept-bytes BYTES the same for every namespace's together (default\n"
		"                         32Mi; 0: no limit)\n"
		"  --layer-root DIR       image layers are opened only below DIR (repeatable;\n"
		"                         default: the overlayfs snapshot directories of\n"
		"                         containerd, k3s, CRI-O/Podman and Docker)\n"
		"  --list-page-size N     list FunctionProbes and pods N objects per request\n"
		"                         (default 500)\n"
		"  --calibrate-every DURATION\n"
		"                         measure the probes' bias and cost again this often,\n"
		"                         a few milliseconds at a time (default 10m; 0: at\n"
		"                         start only)\n"
		"  --self-check           probe a function of this binary, call it, check every\n"
		"                         call was measured, and exit (0: this node can trace)\n"
		"  --version              print the version\n"
		"\n"
		"SIGTERM or SIGINT detaches everything and exits 0; SIGUSR1 logs counters.\n",
		TRACER_SLOW_CALLS_PER_SEC, DEFAULT_MAX_NS_FUNCS, TRACER_MAX_CONTEXTS,
		DEFAULT_NS_INFLIGHT, DEFAULT_NS_SLOW_CALLS);
}

static void usage(FILE *f)
{
	usage_synopsis(f);
	usage_connections(f);
	usage_analysis(f);
	usage_limits(f);
}

/* A count for a limit: digits only, 0 meaning none. */
static int parse_count(const char *s, size_t *ret)
{
	char *end;
	unsigned long long v;

	if (!s[0] || strspn(s, "0123456789") != strlen(s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || v > SIZE_MAX)
		return -EINVAL;
	*ret = (size_t)v;
	return 0;
}

/* A size in bytes: digits, then nothing, Ki or Mi. */
static int parse_bytes(const char *s, size_t *ret)
{
	size_t digits = strspn(s, "0123456789"), shift;
	char num[32];

	if (!digits || digits >= sizeof(num))
		return -EINVAL;
	if (!strcmp(s + digits, ""))
		shift = 0;
	else if (!strcmp(s + digits, "Ki"))
		shift = 10;
	else if (!strcmp(s + digits, "Mi"))
		shift = 20;
	else
		return -EINVAL;
	memcpy(num, s, digits);
	num[digits] = '\0';
	if (parse_count(num, ret) || *ret > (SIZE_MAX >> 21))
		return -EINVAL;
	*ret <<= shift;
	return 0;
}

/* What the command line asks for. */
struct cli {
	struct agent_opts ao;
	const char *kubeconfig, *context, *metrics_address, *health_address;
	const char *tls_cert, *tls_key;
	bool metrics_auth, metrics_tls;
	const char *layer_roots[OVERLAY_MAX_ROOTS];
	size_t nlayer_roots;
	bool self_check;
};

/* parse_option() and parse_args() return this to go on, else the exit code. */
#define CLI_GO_ON -1

/* A per-second or per-namespace limit of flag into *ret: CLI_GO_ON, or 2 with a message. */
static int parse_limit(const char *arg, const char *flag, uint32_t *ret)
{
	size_t n;

	if (parse_count(arg, &n) || n > UINT32_MAX) {
		fprintf(stderr, "retwatch-agent: %s must be a number (0: no limit)\n", flag);
		return 2;
	}
	*ret = (uint32_t)n;
	return CLI_GO_ON;
}

/* The bounds on memory: CLI_GO_ON, or 2 with a message. */
static int parse_memory_option(int c, struct cli *cli)
{
	switch (c) {
	case 'Q':
	case 'q':
		if (parse_bytes(optarg, c == 'Q' ? &cli->ao.max_ns_kept : &cli->ao.max_kept)) {
			fprintf(stderr,
				"retwatch-agent: --max-kept-bytes%s takes a size, such as "
				"16Mi, 512Ki or 1048576 (bytes; 0: no limit)\n",
				c == 'Q' ? "-per-namespace" : "");
			return 2;
		}
		break;
	case 'M':
		if (parse_bytes(optarg, &cli->ao.analysis_cache_bytes)) {
			fprintf(stderr,
				"retwatch-agent: --analysis-cache-bytes takes a size, such "
				"as 64Mi, 512Ki or 1048576 (bytes; 0: 64 files, whatever their size)\n");
			return 2;
		}
		break;
	case 'U':
		if (parse_bytes(optarg, &cli->ao.analysis_max_bytes)) {
			fprintf(stderr, "retwatch-agent: --analysis-max-bytes takes a size, such "
					"as 128Mi, 512Ki or 1048576 (bytes; 0: no limit)\n");
			return 2;
		}
		break;
	}
	return CLI_GO_ON;
}

/* The counts and sizes, and what arguments may be read: CLI_GO_ON, or 2 with a message. */
static int parse_count_option(int c, struct cli *cli)
{
	size_t writes;

	switch (c) {
	case 'P':
		if (parse_count(optarg, &cli->ao.max_probes)) {
			fprintf(stderr, "retwatch-agent: --max-probes must be a number\n");
			return 2;
		}
		break;
	case 'S':
		if (parse_count(optarg, &cli->ao.max_series)) {
			fprintf(stderr, "retwatch-agent: --metrics-max-series must be a number\n");
			return 2;
		}
		break;
	case 'W':
		if (parse_count(optarg, &writes)) {
			fprintf(stderr, "retwatch-agent: --report-writes-per-second must be a "
					"number\n");
			return 2;
		}
		cli->ao.report_writes = (double)writes;
		break;
	case 'b':
		if (parse_bytes(optarg, &cli->ao.report_budget) ||
		    cli->ao.report_budget < REPORTFIT_MIN_BUDGET) {
			fprintf(stderr, "retwatch-agent: --report-budget takes a size of at least "
					"32Ki, such as 1Mi, 512Ki or 1048576 (bytes)\n");
			return 2;
		}
		break;
	case 'F':
		if (parse_count(optarg, &cli->ao.max_ns_funcs)) {
			fprintf(stderr, "retwatch-agent: --max-functions-per-namespace must be a "
					"number (0: no limit)\n");
			return 2;
		}
		break;
	case 'Y':
		if (call_args__redact_add(optarg)) {
			fprintf(stderr,
				"retwatch-agent: --redact takes a parameter name (at most %d of "
				"them)\n",
				CALLARGS_MAX_REDACT);
			return 2;
		}
		break;
	case 'y': call_args__redact_defaults(false); break;
	case 'X':
		if (strcmp(optarg, "allow") && strcmp(optarg, "deny")) {
			fprintf(stderr,
				"retwatch-agent: --argument-capture must be allow or deny\n");
			return 2;
		}
		cli->ao.deny_args = !strcmp(optarg, "deny");
		break;
	case 'G':
		if (parse_count(optarg, &cli->ao.list_page) || !cli->ao.list_page) {
			fprintf(stderr,
				"retwatch-agent: --list-page-size must be a number above 0\n");
			return 2;
		}
		break;
	}
	return CLI_GO_ON;
}

/* --attach and --returns: how the probes attach, and where calls end. */
static int parse_probe_option(int c, struct cli *cli)
{
	if (c == 'a' && tracer_attach_mode__parse(optarg, &cli->ao.attach_mode)) {
		fprintf(stderr,
			"retwatch-agent: --attach must be auto, uprobe_multi or perf_event\n");
		return 2;
	}
	if (c == 'r' && strcmp(optarg, "trampoline") && strcmp(optarg, "ret")) {
		fprintf(stderr, "retwatch-agent: --returns must be trampoline or ret\n");
		return 2;
	}
	if (c == 'r')
		cli->ao.trampoline = !strcmp(optarg, "trampoline");
	return CLI_GO_ON;
}

/* The rates, the namespaces' shares and the durations: CLI_GO_ON, or 2 with a message. */
static int parse_rate_option(int c, struct cli *cli)
{
	switch (c) {
	case 's':
		return parse_limit(optarg, "--slow-calls-per-second", &cli->ao.slow_calls_per_sec);
	case 'I': return parse_limit(optarg, "--max-inflight-per-namespace", &cli->ao.ns_inflight);
	case 'E':
		return parse_limit(optarg, "--slow-calls-per-namespace",
				   &cli->ao.ns_slow_calls_per_sec);
	case 'T':
		if (latency__parse_duration(optarg, &cli->ao.analysis_timeout_ns) ||
		    !cli->ao.analysis_timeout_ns) {
			fprintf(stderr, "retwatch-agent: --analysis-timeout must be a duration "
					"above 0, such as 5s or 500ms\n");
			return 2;
		}
		break;
	case 'B':
		if (latency__parse_duration(optarg, &cli->ao.calibrate_every_ns)) {
			fprintf(stderr, "retwatch-agent: --calibrate-every must be a duration, "
					"such as 10m or 30s (0: at start only)\n");
			return 2;
		}
		break;
	}
	return CLI_GO_ON;
}

static int parse_option(int c, struct cli *cli)
{
	enum log_level level;

	if (c > 0 && strchr("QqMU", c))
		return parse_memory_option(c, cli);
	if (c > 0 && strchr("PSWbFGYyX", c))
		return parse_count_option(c, cli);
	if (c > 0 && strchr("sIETB", c))
		return parse_rate_option(c, cli);
	if (c == 'a' || c == 'r')
		return parse_probe_option(c, cli);
	switch (c) {
	case 'k': cli->kubeconfig = optarg; break;
	case 'c': cli->context = optarg; break;
	case 'n': cli->ao.node = optarg; break;
	case 'l': cli->ao.lease_ns = optarg; break;
	case 'L':
		if (log_parse_level(optarg, &level)) {
			fprintf(stderr, "retwatch-agent: --log-level must be debug, info, warn "
					"or error\n");
			return 2;
		}
		log_set_level(level);
		break;
	case 'm': cli->metrics_address = optarg; break;
	case 'H': cli->health_address = optarg; break;
	case 'Z':
		if (strcmp(optarg, "self-signed") && strcmp(optarg, "none")) {
			fprintf(stderr,
				"retwatch-agent: --metrics-tls must be self-signed or none\n");
			return 2;
		}
		cli->metrics_tls = !strcmp(optarg, "self-signed");
		break;
	case 'z': cli->tls_cert = optarg; break;
	case 'K': cli->tls_key = optarg; break;
	case 'A':
		if (strcmp(optarg, "kube") && strcmp(optarg, "none")) {
			fprintf(stderr, "retwatch-agent: --metrics-auth must be kube or none\n");
			return 2;
		}
		cli->metrics_auth = !strcmp(optarg, "kube");
		break;
	case 'R':
		if (cli->nlayer_roots == OVERLAY_MAX_ROOTS || optarg[0] != '/') {
			fprintf(stderr,
				"retwatch-agent: --layer-root takes an absolute directory, "
				"at most %d times\n",
				OVERLAY_MAX_ROOTS);
			return 2;
		}
		cli->layer_roots[cli->nlayer_roots++] = optarg;
		break;
	case 'g':
		if (debugfile__add_dir(optarg)) {
			fprintf(stderr,
				"retwatch-agent: --debug-dir takes an absolute directory, at most "
				"%d times\n",
				DEBUGFILE_MAX_DIRS);
			return 2;
		}
		break;
	case 'C': cli->self_check = true; break;
	case 'V': printf("retwatch-agent %s\n", RETWATCH_VERSION); return 0;
	case 'h': usage(stdout); return 0;
	default: usage(stderr); return 2;
	}
	return CLI_GO_ON;
}

/* The TLS options of /metrics agree: 0, or -EINVAL with a message. */
static int check_tls(const struct cli *cli)
{
	if (!cli->tls_cert != !cli->tls_key) {
		fprintf(stderr, "retwatch-agent: --metrics-tls-cert and --metrics-tls-key go "
				"together\n");
		return -EINVAL;
	}
	if (cli->tls_cert && !cli->metrics_tls) {
		fprintf(stderr, "retwatch-agent: --metrics-tls none serves plain HTTP: give it or "
				"a certificate, not both\n");
		return -EINVAL;
	}
	return 0;
}

/* The long options; parse_option() takes each. */
static const struct option long_opts[] = {
	{ "kubeconfig", required_argument, NULL, 'k' },
	{ "context", required_argument, NULL, 'c' },
	{ "node-name", required_argument, NULL, 'n' },
	{ "lease-namespace", required_argument, NULL, 'l' },
	{ "log-level", required_argument, NULL, 'L' },
	{ "attach", required_argument, NULL, 'a' },
	{ "returns", required_argument, NULL, 'r' },
	{ "metrics-address", required_argument, NULL, 'm' },
	{ "health-address", required_argument, NULL, 'H' },
	{ "metrics-auth", required_argument, NULL, 'A' },
	{ "metrics-tls", required_argument, NULL, 'Z' },
	{ "metrics-tls-cert", required_argument, NULL, 'z' },
	{ "metrics-tls-key", required_argument, NULL, 'K' },
	{ "max-probes", required_argument, NULL, 'P' },
	{ "metrics-max-series", required_argument, NULL, 'S' },
	{ "report-writes-per-second", required_argument, NULL, 'W' },
	{ "report-budget", required_argument, NULL, 'b' },
	{ "slow-calls-per-second", required_argument, NULL, 's' },
	{ "max-functions-per-namespace", required_argument, NULL, 'F' },
	{ "max-inflight-per-namespace", required_argument, NULL, 'I' },
	{ "slow-calls-per-namespace", required_argument, NULL, 'E' },
	{ "layer-root", required_argument, NULL, 'R' },
	{ "list-page-size", required_argument, NULL, 'G' },
	{ "max-kept-bytes-per-namespace", required_argument, NULL, 'Q' },
	{ "max-kept-bytes", required_argument, NULL, 'q' },
	{ "redact", required_argument, NULL, 'Y' },
	{ "no-redact", no_argument, NULL, 'y' },
	{ "analysis-timeout", required_argument, NULL, 'T' },
	{ "analysis-cache-bytes", required_argument, NULL, 'M' },
	{ "analysis-max-bytes", required_argument, NULL, 'U' },
	{ "calibrate-every", required_argument, NULL, 'B' },
	{ "argument-capture", required_argument, NULL, 'X' },
	{ "debug-dir", required_argument, NULL, 'g' },
	{ "self-check", no_argument, NULL, 'C' },
	{ "version", no_argument, NULL, 'V' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static int parse_args(int argc, char **argv, struct cli *ret)
{
	int c, e;

	*ret = (struct cli){
		.ao = {
			.node = getenv("NODE_NAME"),
			.lease_s = 15,
			.version = RETWATCH_VERSION,
			.max_probes = DEFAULT_MAX_PROBES,
			.trampoline = true,
			.max_series = DEFAULT_MAX_SERIES,
			.report_writes = DEFAULT_REPORT_WRITES,
			.report_budget = REPORTFIT_DEFAULT_BUDGET,
			.list_page = 500,
			.slow_calls_per_sec = TRACER_SLOW_CALLS_PER_SEC,
			.max_ns_funcs = DEFAULT_MAX_NS_FUNCS,
			.max_ns_kept = KEEPSHARE_NS_BYTES,
			.max_kept = KEEPSHARE_NODE_BYTES,
			.ns_inflight = DEFAULT_NS_INFLIGHT,
			.ns_slow_calls_per_sec = DEFAULT_NS_SLOW_CALLS,
			.analysis_timeout_ns = ANALYZER_DEFAULT_TIMEOUT_NS,
			.analysis_cache_bytes = DEFAULT_ANALYSIS_CACHE_BYTES,
			.analysis_max_bytes = DEFAULT_ANALYSIS_MAX_BYTES,
			.calibrate_every_ns = DEFAULT_CALIBRATE_EVERY_NS,
		},
		.metrics_address = DEFAULT_METRICS_ADDRESS,
		.health_address = "none",
		.metrics_auth = true,
		.metrics_tls = true,
	};
	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		e = parse_option(c, ret);
		if (e != CLI_GO_ON)
			return e;
	}
	if (check_tls(ret))
		return 2;
	if (ret->nlayer_roots && overlay__set_roots(ret->layer_roots, ret->nlayer_roots)) {
		fprintf(stderr, "retwatch-agent: out of memory for --layer-root\n");
		return 1;
	}
	/* --self-check needs no node name */
	if (ret->self_check && optind == argc)
		return CLI_GO_ON;
	if (optind < argc || !ret->ao.node || !ret->ao.node[0]) {
		if (optind >= argc)
			fprintf(stderr, "retwatch-agent: give --node-name NODE or set NODE_NAME\n");
		usage(stderr);
		return 2;
	}
	return CLI_GO_ON;
}

static void setup_signals(void)
{
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGUSR1, on_signal);
	signal(SIGPIPE, SIG_IGN);
}

static int load_creds(const char *kubeconfig, const char *context, struct kube_creds *ret,
		      struct rw_error *err)
{
	if (kubeconfig)
		return kubeconfig__load(kubeconfig, context, ret, err);
	if (!getenv("KUBERNETES_SERVICE_HOST"))
		return rw_error_set(err, EINVAL,
				    "not in a pod: give --kubeconfig FILE to reach the API server");
	return kubeconfig__in_cluster(NULL, ret, err);
}

/* Reads the credentials, then settles the Lease's namespace: --lease-namespace,
 * else $POD_NAMESPACE, else the credentials' namespace, else retwatch. The
 * namespace may point into ret, which must outlive cli->ao. */
static int setup_kube(struct cli *cli, struct kube_creds *ret, struct rw_error *err)
{
	int e = load_creds(cli->kubeconfig, cli->context, ret, err);

	if (e)
		return e;
	if (!cli->ao.lease_ns)
		cli->ao.lease_ns = getenv("POD_NAMESPACE");
	if (!cli->ao.lease_ns)
		cli->ao.lease_ns = ret->namespace ? ret->namespace : "retwatch";
	return 0;
}

/* Serves /metrics, /healthz and /readyz on the metrics address, /healthz and
 * /readyz on the health address ("none": not there; both none: *ret NULL),
 * /metrics to the users auth allows (NULL: anyone). -EINVAL when it cannot
 * (err says why; the metrics module gives no errno). */
static int start_metrics(const struct cli *cli, struct metrics_auth *auth,
			 struct metrics_server **ret, struct rw_error *err)
{
	bool metrics = strcmp(cli->metrics_address, "none"),
	     health = strcmp(cli->health_address, "none");
	struct metrics_tls tls = { 0 };
	char about[sizeof(tls.about)];

	*ret = NULL;
	if (!metrics && !health)
		return 0;
	if (metrics && cli->tls_cert ? metrics_tls__load(cli->tls_cert, cli->tls_key, &tls, err)
	    : metrics && cli->metrics_tls ? metrics_tls__self_signed("retwatch-agent", &tls, err)
					  : 0)
		return -EINVAL;
	snprintf(about, sizeof(about), "%s", tls.about);
	*ret = metrics_server__start(metrics ? cli->metrics_address : NULL,
				     tls.cert_pem ? &tls : NULL, err);
	if (!*ret)
		return -EINVAL;
	if (health && metrics_server__serve_health(*ret, cli->health_address, err))
		return -EINVAL;
	metrics_server__require_auth(*ret, metrics ? auth : NULL);
	if (metrics)
		log_info("serving /metrics, /healthz and /readyz on port %u",
			 metrics_server__port(*ret));
	if (metrics && cli->tls_cert)
		log_emit(log_event(strstr(about, "EXPIRED") ? LOG_WARN : LOG_INFO,
				   "/metrics over TLS only, with the certificate %s (%s)",
				   cli->tls_cert, about));
	else if (metrics && cli->metrics_tls)
		log_info("/metrics over TLS only, with a self-signed certificate made at start "
			 "(%s): give one a scraper can verify with --metrics-tls-cert",
			 about);
	else if (metrics)
		log_warn("/metrics over plain HTTP (--metrics-tls none): its bearer tokens and "
			 "every tenant's function names cross the network in clear");
	if (metrics)
		log_info("/metrics %s", auth ? "answers only users allowed to get /metrics "
					       "(TokenReview, SubjectAccessReview)"
					     : "answers anyone (--metrics-auth none)");
	if (health)
		log_info("serving /healthz and /readyz on health port %u",
			 metrics_server__health_port(*ret));
	return 0;
}

/* Says how many descriptors the agent may hold: the tracer has raised the
 * soft limit to the hard one, and every traced function of a process holds
 * uprobe links. */
static void log_open_files(void)
{
	struct open_files of;
	int e = open_files__read(&of);
	cJSON *ev;

	if (e) {
		log_warn("failed to read the open files limit: %s", strerror(-e));
		return;
	}
	ev = log_event(LOG_INFO, "open files limit %llu (hard %llu), %zu open",
		       (unsigned long long)of.soft, (unsigned long long)of.hard, of.open);
	if (!ev)
		return;
	cJSON_AddNumberToObject(ev, "open_files_limit", (double)of.soft);
	cJSON_AddNumberToObject(ev, "open_files_hard_limit", (double)of.hard);
	log_emit(ev);
}

/* Runs the agent until SIGTERM or SIGINT, logging its counters on SIGUSR1 and
 * at the end. 1 when the agent could not go on, or when it was stopped before
 * its first turn; else 0. */
static int run_agent(struct agent *a)
{
	int e = 1;

	while (!exiting) {
		e = agent__run(a, &exiting, &stats_wanted) ? 1 : 0;
		if (e)
			break;
		if (stats_wanted) {
			stats_wanted = 0;
			agent__log_stats(a);
		}
	}
	agent__log_stats(a);
	log_info("stopping: detaching every probe");
	return e;
}

/* Connects to the API server, starts the metrics server and the agent, runs
 * it, and takes everything down again. Returns the exit code. */
static int run(struct cli *cli)
{
	struct metrics_server *ms = NULL;
	struct metrics_auth *auth = NULL;
	struct kube_creds creds = { 0 };
	struct rw_error err = { "" };
	struct agent *a = NULL;
	struct kube *k = NULL;
	int e = 1;

	if (setup_kube(cli, &creds, &err) || !(k = kube__new(&creds, &err))) {
		log_error("%s", err.msg);
		goto out;
	}
	if (cli->metrics_auth && !(auth = metrics_auth__new(k))) {
		log_error("out of memory");
		goto out;
	}
	if (start_metrics(cli, auth, &ms, &err)) {
		log_error("%s", err.msg);
		goto out;
	}
	cli->ao.metrics = ms;
	a = agent__new(k, &cli->ao, &err);
	if (!a) {
		log_error("failed to start: %s", err.msg);
		goto out;
	}
	log_open_files();
	e = run_agent(a);
out:
	agent__free(a);
	metrics_server__stop(ms); /* its threads first: they use auth and k */
	metrics_auth__free(auth);
	kube__free(k);
	kube_creds__free(&creds);
	return e;
}

int main(int argc, char **argv)
{
	struct cli cli;
	int e = parse_args(argc, argv, &cli);

	if (e != CLI_GO_ON)
		return e;
	if (cli.self_check)
		return selfcheck__run(cli.ao.attach_mode);
	log_route_libbpf();
	setup_signals();
	return run(&cli);
}
