#!/bin/sh
# How many short-lived processes the guest starts a second, for $1 seconds (the clock: /proc/uptime, in
# hundredths of a second, read without starting a process).
centis() { read -r up _ < /proc/uptime; echo "${up%.*}${up#*.}"; }
start=$(centis); now=$start; n=0
end=$(( start + ${1%.*} * 100 ))
while [ "$now" -lt "$end" ]; do
    /bin/true; n=$((n + 1))
    read -r up _ < /proc/uptime; now="${up%.*}${up#*.}"
done
echo "forks_per_s: $(( n * 100 / (now - start) ))"
