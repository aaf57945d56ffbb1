/* A device fault while the loader runs: a kernel traps on the consumer's
 * stream, the CUDA context is lost and every later copy fails. The loader
 * must stop with GF_ENODEV and a message that says so (never hang, never
 * deliver a batch it could not copy), and gf_close must return. A process
 * of its own: on a GPU a fault ends the context for the whole process.
 * Exits 77 (skipped) without CUDA in the build or a device in the machine. */
#include "gpufeed.h"
#include "config.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

#if !GF_HAVE_CUDA
int main(void)
{
    printf("SKIP: this build has no CUDA\n");
    return 77;
}
#else

#include <check.h>
#include <cuda_runtime_api.h>
#include <string.h>

#include "cuda_present.h"

void tu_cuda_trap(void *stream);

START_TEST(a_device_fault_stops_the_loader_with_an_error)
{
    char *root = tu_image_folder(3, 11, 40, 30, "png");
    gf_settings s;
    gf_default_settings(&s);
    s.data = root;
    s.width = 24;
    s.height = 20;
    s.batch_size = 4;
    s.epochs = 50; /* far more batches than the ring holds */
    s.threads = 2;
    s.prefetch_depth = 3;
    s.device = GF_DEVICE_CUDA;
    s.dtype = GF_DTYPE_FLOAT16;
    gf_loader *l = NULL;
    ck_assert_int_eq(gf_open(&l, &s), 0);
    cudaStream_t stream;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

    gf_batch *b;
    ck_assert_int_eq(gf_next(l, &b), 0);
    ck_assert_int_eq(gf_batch_wait(b, stream), 0);
    tu_cuda_trap(stream);
    ck_assert_int_ne(cudaStreamSynchronize(stream), cudaSuccess);
    int rc = gf_release_stream(l, b, stream);
    ck_assert_msg(rc == 0 || rc == GF_ENODEV, "release after the fault: %d", rc);

    /* Batches copied before the fault may still come; then the error. */
    int delivered = 0;
    while ((rc = gf_next(l, &b)) == 0 && delivered < 1000) {
        delivered++;
        gf_release_stream(l, b, stream);
    }
    ck_assert_msg(rc == GF_ENODEV, "gf_next after the fault: %d (%s), %d batches", rc,
                  gf_strerror(rc), delivered);
    ck_assert_int_le(delivered, s.prefetch_depth);
    const char *why = gf_last_error(l);
    ck_assert_msg(strstr(why, "CUDA"), "message: %s", why);
    ck_assert_int_eq(gf_next(l, &b), GF_ENODEV); /* and it stays stopped */
    gf_close(&l);
    cudaStreamDestroy(stream);
    tu_rmrf(root);
    free(root);
}
END_TEST

int main(void)
{
    int present = tu_cuda_present();
    if (present != 0)
        return present;
    Suite *s = suite_create("gpu_fault");
    TCase *t = tcase_create("fault");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, a_device_fault_stops_the_loader_with_an_error);
    suite_add_tcase(s, t);
    return tu_run_cuda_suite(s);
}
#endif
