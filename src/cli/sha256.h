/*
 * SHA-256 (FIPS 180-4), for the checksums prepare writes into its
 * manifest: what `sha256sum` prints, so a user can check a shard with the
 * tools at hand. Pure functions on the caller's state; any thread.
 */
#ifndef GF_CLI_SHA256_H
#define GF_CLI_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct cli_sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t fill;
} cli_sha256;

void cli_sha256_init(cli_sha256 *s);
void cli_sha256_update(cli_sha256 *s, const void *data, size_t len);
/* The digest as 64 lowercase hex digits and a NUL. */
void cli_sha256_hex(cli_sha256 *s, char out[65]);

#endif /* GF_CLI_SHA256_H */
