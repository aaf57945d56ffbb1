typedef int gf__placeholder_bench;
