typedef int gf__placeholder_main;
int main(void){return 0;}
