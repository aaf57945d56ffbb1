/* placeholder: being written */
typedef int gf__placeholder_loader;
