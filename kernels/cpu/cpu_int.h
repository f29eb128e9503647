/* The CPU backend's functions, shared by its source files (not installed). */
#ifndef RUMOR_CPU_INT_H
#define RUMOR_CPU_INT_H

#include "ops.h"

void cpu_fill(rumor_device_t *d, float *y, float v, size_t n);
void cpu_add(rumor_device_t *d, float *y, const float *a, const float *b, size_t n);
void cpu_axpby(rumor_device_t *d, float *y, float a, const float *x, float b, size_t n);
int cpu_sumsq(rumor_device_t *d, const float *x, size_t n, double *out, size_t *nonfinite);
int cpu_axpy_dist(rumor_device_t *d, float *y, float a, const float *x, size_t n, double *sqdist);
void cpu_gemm_batched(rumor_device_t *d, int ta, int tb, int m, int n, int k, float alpha,
                      const float *a, int lda, long long sa, const float *b, int ldb, long long sb,
                      float beta, float *c, int ldc, long long sc, int batch);
void cpu_layernorm_forward(rumor_device_t *d, float *y, float *mean, float *rstd, const float *x,
                           const float *w, const float *b, int rows, int C, float eps);
void cpu_layernorm_backward_x(rumor_device_t *d, float *dx, const float *dy, const float *x,
                              const float *w, const float *mean, const float *rstd, int rows, int C,
                              int accumulate);
void cpu_layernorm_backward_w(rumor_device_t *d, float *dw, float *db, const float *dy,
                              const float *x, const float *mean, const float *rstd, int rows,
                              int C);
void cpu_attention_forward(rumor_device_t *d, float *out, float *lse, const float *qkv, int B,
                           int T, int C, int NH);
void cpu_attention_backward(rumor_device_t *d, float *dqkv, const float *dout, const float *qkv,
                            const float *out, const float *lse, int B, int T, int C, int NH);
void cpu_embed_forward(rumor_device_t *d, float *out, const int32_t *tok, const float *wte,
                       const float *wpe, int B, int T, int C);
void cpu_embed_backward(rumor_device_t *d, float *dwte, float *dwpe, const float *dout,
                        const int32_t *tok, int B, int T, int C, int V);
int cpu_stream_create(rumor_device_t *d, rumor_stream_t **out);
void cpu_stream_destroy(rumor_device_t *d, rumor_stream_t *s);
int cpu_set_stream(rumor_device_t *d, rumor_stream_t *s);
int cpu_stream_sync(rumor_device_t *d, rumor_stream_t *s);
int cpu_event_create(rumor_device_t *d, rumor_event_t **out);
void cpu_event_destroy(rumor_device_t *d, rumor_event_t *e);
int cpu_event_record(rumor_device_t *d, rumor_event_t *e, rumor_stream_t *s);
int cpu_stream_wait(rumor_device_t *d, rumor_stream_t *s, rumor_event_t *e);
int cpu_event_sync(rumor_device_t *d, rumor_event_t *e);
int cpu_event_query(rumor_device_t *d, rumor_event_t *e);
int cpu_copy_async(rumor_device_t *d, void *dst, const void *src, size_t bytes, rumor_stream_t *s);
int cpu_copy_peer(rumor_device_t *dd, void *dst, rumor_device_t *sd, const void *src,
                  size_t bytes, rumor_stream_t *s);
int cpu_supports(const rumor_device_t *d, rumor_cap cap);

#endif
