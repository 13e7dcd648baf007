#!/bin/sh
# SPDX-License-Identifier: MIT
# Draws bench/plots/herd_scale.png and bench/plots/sessions_scale.png (issue 27
# item 5) from the figures in bench/RESULTS.md section 6c, in the style of
# bench/report.sh. Usage: sh bench/plot27.sh   (needs gnuplot)
set -eu
cd "$(dirname "$0")"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# N failover_p50 failover_p99 check_alone_p50 (ms; herd --probe 1, TTL 30 s at
# 10,000, 10 s below; 100: the 6c table, no probe)
cat >"$T/herd.dat" <<'D'
2 1.44 8.33 0.43
100 1.27 21.1 NaN
1000 1.95 5.88 1.18
10000 10.1 21.9 9.81
D
# sessions idle_cpu_ms_per_s keepalive_rtt_mean_ms rss_mb (bench/many --count 0 --sessions K)
cat >"$T/sessions.dat" <<'D'
2000 1.11 28.0 4.8
10000 9.63 366.8 22.2
D
gnuplot <<G
set terminal pngcairo size 700,480 noenhanced font 'sans,10'
set output 'plots/herd_scale.png'
set title 'One election, N candidates: failover (resign -> successor ELECTED) and the check alone'
set xlabel 'candidates N'
set ylabel 'milliseconds'
set logscale xy
set grid
set key top left
plot '$T/herd.dat' using 1:2 with linespoints lw 2 pt 7 title 'failover p50', \
     '$T/herd.dat' using 1:3 with linespoints lw 2 pt 6 dt 2 title 'failover p99', \
     '$T/herd.dat' using 1:4 with linespoints lw 2 pt 5 title 'successor check on an idle client, p50'
set output 'plots/sessions_scale.png'
set title 'K sessions on one client, TTL 10 s, idle'
set xlabel 'sessions K'
set ylabel 'idle CPU ms/s, RSS MB, keepalive RTT ms'
plot '$T/sessions.dat' using 1:2 with linespoints lw 2 pt 7 title 'idle CPU (ms per s)', \
     '$T/sessions.dat' using 1:3 with linespoints lw 2 pt 5 title 'keepalive RTT mean (ms)', \
     '$T/sessions.dat' using 1:4 with linespoints lw 2 pt 6 dt 2 title 'RSS for the sessions (MB)'
G
echo "wrote bench/plots/herd_scale.png bench/plots/sessions_scale.png"
