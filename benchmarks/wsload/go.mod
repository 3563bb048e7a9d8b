module supervise/benchmarks/wsload

go 1.21
