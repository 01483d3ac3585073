module retwatch/bench/workload

go 1.21
