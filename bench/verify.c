typedef int gf__placeholder_verify;
