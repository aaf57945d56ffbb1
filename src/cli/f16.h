/*
 * float -> IEEE binary16, as the device converts (the demo trainer's
 * --amp reference). Pure function, any thread.
 */
#ifndef GF_CLI_F16_H
#define GF_CLI_F16_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* IEEE binary16 bits of f, rounded to nearest even (as __float2half_rn). */
uint16_t cli_f16_bits(float f);

#ifdef __cplusplus
}
#endif
#endif /* GF_CLI_F16_H */
