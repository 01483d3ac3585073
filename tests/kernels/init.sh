#!/bin/busybox sh
# /init of the kernel matrix's initramfs (tests/kernels/vm.py): loads the
# 9p modules, mounts this machine's root read-only from the host with a
# writable tmpfs /tmp and the run's own writable share on /tmp/retwatch-vm,
# and runs the share's cmd.sh chrooted there. Its exit status goes to the
# share's `rc`; the VM then powers off. Another architecture's VM mounts
# that architecture's sysroot as its root, with busybox's commands in
# /tmp/.bin, and this machine's root at /host for the run's directory.
B=/bin/busybox
$B mkdir -p /proc /sys /dev /root
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev

die() {
	echo "retwatch-vm: $*"
	$B poweroff -f
}

for m in $($B cat /modules.order); do
	$B insmod "/lib/modules/$m.ko" || die "insmod $m failed"
done

R=/root
$B mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=524288 hostroot $R ||
	die "cannot mount the host's root"
$B mount -t proc proc $R/proc
$B mount -t sysfs sys $R/sys
$B mount -t devtmpfs dev $R/dev
$B mount -t devpts devpts $R/dev/pts 2>/dev/null
$B mkdir -p $R/dev/shm
$B mount -t tmpfs shm $R/dev/shm
HOST=$R
$B mkdir -p /host
if $B mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=524288 host /host 2>/dev/null; then
	HOST=/host
fi
# the host's /tmp, kept reachable under the tmpfs for a run started there
$B mkdir -p /hosttmp
$B mount --bind $HOST/tmp /hosttmp
$B mount -t tmpfs tmp $R/tmp
# The run's share: cmd.sh to run, cwd (where it runs), rc for its exit status.
OUT=/tmp/retwatch-vm
$B mkdir -p $R$OUT
$B mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 out $R$OUT ||
	die "cannot mount the run's share"
CWD=$($B cat $R$OUT/cwd)
case $CWD in
/tmp) ;;
/tmp/*)
	$B mkdir -p "$R$CWD"
	$B mount --bind "/hosttmp${CWD#/tmp}" "$R$CWD" || die "cannot reach $CWD"
	;;
*)
	if [ $HOST = /host ]; then
		$B mount --bind "/host$CWD" "$R$CWD" || die "cannot reach $CWD"
	fi
	;;
esac
if [ $HOST = /host ]; then
	$B mkdir -p $R/tmp/.bin
	$B chroot $R /bin/busybox --install -s /tmp/.bin
fi
$B mount -t tmpfs run $R/run
$B mount -t tmpfs vartmp $R/var/tmp
$B mount -t bpf bpf $R/sys/fs/bpf
# cgroups laid out as on the machines the tests run on: v1 controllers and
# the unified hierarchy beside them (the agent's tests make pods there). A
# kernel without a v1 controller (Debian's 6.12 has no v1 memory) goes
# without its directory.
$B mount -t tmpfs cgroup $R/sys/fs/cgroup
for c in cpu cpuacct cpuset memory devices freezer blkio pids; do
	$B mkdir $R/sys/fs/cgroup/$c
	$B mount -t cgroup -o $c cgroup $R/sys/fs/cgroup/$c 2>/dev/null || $B rmdir $R/sys/fs/cgroup/$c
done
$B mkdir $R/sys/fs/cgroup/systemd $R/sys/fs/cgroup/unified
$B mount -t cgroup -o none,name=systemd cgroup $R/sys/fs/cgroup/systemd
$B mount -t cgroup2 cgroup2 $R/sys/fs/cgroup/unified
$B mount -t tracefs tracefs $R/sys/kernel/tracing 2>/dev/null
$B mount -t debugfs debugfs $R/sys/kernel/debug 2>/dev/null
$B ip link set lo up

$B chroot $R /bin/busybox sh "$OUT/cmd.sh" </dev/null
echo $? >"$R$OUT/rc"
$B sync
$B poweroff -f
