/* Compiles the installed header with nothing before it. */
#include "gpufeed.h"

int main(void)
{
    gf_settings s;
    gf_default_settings(&s);
    return s.batch_size > 0 ? 0 : 1;
}
