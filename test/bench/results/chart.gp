set terminal pngcairo size 1400,900 font "DejaVu Sans,10"
set output "chart.png"
set termoption noenhanced
set datafile missing "?"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.9 border rgb "#555555"
set logscale y
set yrange [10:*]
set grid ytics mytics
set ylabel "median ms (log scale)"
set key outside right top vertical noenhanced
set multiplot layout 2,1 title "async_fdw benchmark: 2000000 rows, 4 shards, median of 3 runs"
set title "RTT 0 ms (fetch_size 100 and best of 100,1000,10000)"
plot "chart.dat" index 0 using 2:xtic(1) title columnhead lc rgb "#999999", \
     '' index 0 using 3 title columnhead lc rgb "#a6cee3", \
     '' index 0 using 4 title columnhead lc rgb "#b2df8a", \
     '' index 0 using 5 title columnhead lc rgb "#fdbf6f", \
     '' index 0 using 6 title columnhead lc rgb "#1f78b4", \
     '' index 0 using 7 title columnhead lc rgb "#33a02c", \
     '' index 0 using 8 title columnhead lc rgb "#ff7f00", \
     '' index 0 using 9 title columnhead lc rgb "#222222"
set title "RTT 1 ms (fetch_size 1000 and best of 1000,10000)"
plot "chart.dat" index 1 using 2:xtic(1) title columnhead lc rgb "#999999", \
     '' index 1 using 3 title columnhead lc rgb "#a6cee3", \
     '' index 1 using 4 title columnhead lc rgb "#b2df8a", \
     '' index 1 using 5 title columnhead lc rgb "#fdbf6f", \
     '' index 1 using 6 title columnhead lc rgb "#1f78b4", \
     '' index 1 using 7 title columnhead lc rgb "#33a02c", \
     '' index 1 using 8 title columnhead lc rgb "#ff7f00", \
     '' index 1 using 9 title columnhead lc rgb "#222222"
unset multiplot
