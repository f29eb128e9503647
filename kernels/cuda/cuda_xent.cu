/* STUB: being written */
#include "cuda_int.h"
void cu_softmax_xent_forward(rumor_device_t *d, float *probs, float *losses, const float *logits, const int32_t *labels, int batch, int classes)
{ cu_keep(d, cudaErrorNotSupported, "not written", __FILE__, __LINE__); }
void cu_softmax_xent_backward(rumor_device_t *d, float *dlogits, const float *probs, const int32_t *labels, int batch, int classes, float scale)
{ cu_keep(d, cudaErrorNotSupported, "not written", __FILE__, __LINE__); }
