/* STUB: being written */
#include "cuda_int.h"
void cu_attention_forward(rumor_device_t *d, float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{ cu_keep(d, cudaErrorNotSupported, "not written", __FILE__, __LINE__); }
void cu_attention_backward(rumor_device_t *d, float *dqkv, float *datt, const float *dout, const float *qkv, const float *att, int B, int T, int C, int NH)
{ cu_keep(d, cudaErrorNotSupported, "not written", __FILE__, __LINE__); }
