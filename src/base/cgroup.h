/* SPDX-License-Identifier: MIT */
/*
 * Which container a process belongs to: the container id its cgroup path
 * names (/proc/PID/cgroup), and the ids a Pod's status names, so the two can
 * be matched. Whoever manages a process's cgroups shapes that text (a
 * container may create and name its own sub-cgroups), so it is parsed as
 * untrusted: bounds checked, never copied, any line may be garbage.
 *
 * A path component names a container when it is
 *   - 64 lowercase hex digits: the cgroupfs driver's
 *     /kubepods[/besteffort|/burstable]/pod<uid>/<id>, plain Docker's /docker/<id>;
 *   - "<runtime>-<id>.scope", runtime cri-containerd, crio, docker or libpod:
 *     the systemd driver's .../kubepods-burstable-pod<uid>.slice/crio-<id>.scope,
 *     Docker's /system.slice/docker-<id>.scope (not crio-conmon-<id>.scope nor
 *     libpod-conmon-<id>.scope: those hold the runtime's monitor process);
 *   - "<slice>:<runtime>:<id>": containerd's systemd path as cgroup v1 shows it
 *     under /system.slice/containerd.service/.
 * On a line, the last such component wins: a kind node or Docker-in-Docker
 * nests the containers it runs under its own, and the process belongs to the
 * innermost one. Across lines (cgroup v1 has one per hierarchy), the id found
 * deepest wins (depth in path components, ".." counting one up); on a tie the
 * v2 line ("0::") wins, then the first v1 line. A line ending in " (deleted)"
 * (a cgroup removed while the process is a zombie) still names its id.
 *
 * The rules cannot tell a nested container from a sub-cgroup a process
 * created and named after another container's id, which any process allowed
 * to create cgroups (a privileged or systemd-run container) can do: match the
 * id against the containers of the pods on the node before trusting it.
 * A name cannot add lines: the kernel refuses cgroup names holding a newline.
 *
 * A reader inside a cgroup namespace sees paths relative to its own root
 * ("0::/" for its own cgroup, "0::/../../<sibling>/..." for others): run the
 * agent in the host's cgroup namespace to see every container.
 */
#ifndef RETWATCH_CGROUP_H
#define RETWATCH_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CGROUP_ID_LEN 64 /* container ids are 64 lowercase hex digits */
#define CGROUP_FILE_MAX (64 * 1024)
#define CGROUP_UID_MAX 47 /* a pod uid is 36 characters */

/*
 * The container id named in the text of a /proc/PID/cgroup file (all lines,
 * not NUL-terminated), or -ENOENT when the process is in no container cgroup,
 * -EINVAL when the text is malformed (a line not "ID:CONTROLLERS:/PATH", a
 * NUL byte, no line at all). ret_id gets CGROUP_ID_LEN + 1 bytes, written only
 * on success.
 */
int cgroup__parse_container_id(const char *text, size_t len, char *ret_id);

/*
 * The pod and the container of it that the text of a /proc/PID/cgroup file
 * (len bytes) names, read at the kubelet's positions: the first path
 * component that is a pod's cgroup, "pod<uid>" (cgroupfs driver) or
 * "[kubelet-]kubepods[-<qos>]-pod<uid with _>.slice" (systemd driver), and the
 * container component right after it (or, for cgroup v1 under
 * containerd.service, "<pod slice>:<runtime>:<id>" in the same component).
 * A container can create cgroups only below its own, so a nested
 * "pod<other uid>/<other id>" it makes there claims nothing: the last id of
 * the path is not taken. ret_uid gets CGROUP_UID_MAX + 1 bytes, the uid with
 * '-' as the API server writes it; ret_id CGROUP_ID_LEN + 1. Every line that
 * names a pod container must name the same one (-EINVAL otherwise, or for
 * malformed text); -ENOENT when none does.
 */
int cgroup__parse_pod(const char *text, size_t len, char *ret_uid, char *ret_id);

/*
 * The container id of a Pod's status.containerStatuses[].containerID:
 * "containerd://<id>", "cri-o://<id>", "docker://<id>", or any other
 * "<scheme>://<id>" with id 64 lowercase hex digits. -EINVAL otherwise.
 */
int cgroup__status_container_id(const char *container_id, char *ret_id);

/*
 * Reads PROC/PID/cgroup (proc is normally "/proc"; tests pass a fake tree)
 * and parses it; also returns the process's start time (field 22 of
 * PROC/PID/stat, clock ticks since boot) when ret_starttime is not NULL:
 * with pid it names a process across pid reuse. Both files are read through
 * one open PROC/PID directory, which the kernel ties to that process, so they
 * describe the same one. -ENOENT (process gone, or not in a container),
 * -EFBIG (cgroup file over CGROUP_FILE_MAX), -EINVAL (malformed), -errno.
 */
int cgroup__pid_container(const char *proc, pid_t pid, char *ret_id, uint64_t *ret_starttime);

/* The same, with cgroup__parse_pod(): the pod uid and its container's id. */
int cgroup__pid_pod(const char *proc, pid_t pid, char *ret_uid, char *ret_id,
		    uint64_t *ret_starttime);

/*
 * Field 22 of a /proc/PID/stat text (starttime, clock ticks since boot).
 * The name (field 2) is the process's own choice and may hold spaces, ")"
 * and newlines: fields are counted from the last ")". -EINVAL when
 * malformed (a field missing or empty, not a number, over 64 bits).
 */
int cgroup__parse_starttime(const char *text, size_t len, uint64_t *ret);
/* The start time of process pid alone (PROC/PID/stat). -ENOENT (gone), -EINVAL, -errno. */
int cgroup__pid_starttime(const char *proc, pid_t pid, uint64_t *ret_starttime);

#endif
