#!/bin/sh
# Where a task's memory comes from when its CPUs' node has none: the task, bound to CPUs $1, writes $2 MiB
# into a fresh tmpfs (shmem pages are allocated by the writer's policy, local by default), and each node's
# Shmem grows by what it gave. On memoryless-3 (node 1 memoryless, node 0 at 20, node 2 at 30) the kernel's
# fallback order sends it all to node 0.
shmem() { for f in /sys/devices/system/node/node[0-9]*/meminfo; do
    while read -r _ n k v _; do [ "$k" = Shmem: ] && echo "$n $v"; done < "$f"; done; }
mkdir -p /mnt/memless && mount -t tmpfs -o size=$(( $2 + 16 ))m memless /mnt/memless || exit 1
shmem > /tmp/memless.before
taskset -c "$1" dd if=/dev/zero of=/mnt/memless/f bs=1048576 count="$2" 2>/dev/null || exit 1
shmem | while read -r n after; do
    before=$(while read -r m b; do [ "$m" = "$n" ] && echo "$b"; done < /tmp/memless.before)
    echo "node${n}_kib: $(( after - before ))"
done
