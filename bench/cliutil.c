typedef int gf__placeholder_cliutil;
