/* Lazy (row-wise) Adam over the rows an uncoalesced sparse gradient names: the update of
 * torch.optim.SparseAdam, in one pass over the gradient and one over the rows it touched.
 * Front end and PyTorch reference: kernels/rowwise_adam.py.
 *
 *   g_r = sum of the gradient values naming row r (in the order given)
 *   m_r = m_r + (g_r - m_r) (1 - beta1)
 *   v_r = v_r + (g_r^2 - v_r) (1 - beta2)
 *   w_r = w_r - step_size m_r / (sqrt(v_r) + eps)    step_size = lr sqrt(1 - beta2^t) / (1 - beta1^t)
 *
 * w, m, v: [rows, dim] float32, contiguous. ids: [nnz] int64 row ids. values: [nnz, dim] float32, row stride value_stride. slot: [rows] int32, all
 * -1 on entry and on return (the row -> scratch row map). scratch: [nnz, dim] float32 and
 * touched: [nnz] int64, any contents. The scalars come rounded from double, as torch rounds
 * a Python float for a float32 op, so each row's update is SparseAdam's arithmetic (a row's
 * repeated values are summed in the order given, where SparseAdam sums them after its
 * coalesce). Returns the number of rows updated, or -1 (nothing changed) if an id is out of
 * range.
 */
#include <math.h>
#include <stdint.h>

int64_t rowwise_adam(float *restrict w, float *restrict m, float *restrict v, int64_t rows,
                     int64_t dim,
                     const int64_t *restrict ids, const float *restrict values,
                     int64_t value_stride, int64_t nnz, int32_t *restrict slot,
                     float *restrict scratch, int64_t *restrict touched, float one_minus_beta1,
                     float one_minus_beta2, float eps, float step_size) {
    int64_t n = 0;
    for (int64_t i = 0; i < nnz; i++) {
        const int64_t row = ids[i];
        if (row < 0 || row >= rows) {
            for (int64_t j = 0; j < n; j++) slot[touched[j]] = -1;
            return -1;
        }
        const float *g = values + i * value_stride;
        int32_t s = slot[row];
        if (s < 0) {
            s = (int32_t)n;
            slot[row] = s;
            touched[n++] = row;
            float *acc = scratch + (int64_t)s * dim;
            for (int64_t d = 0; d < dim; d++) acc[d] = g[d];
        } else {
            float *acc = scratch + (int64_t)s * dim;
            for (int64_t d = 0; d < dim; d++) acc[d] += g[d];
        }
    }
    /* The rows are scattered through tables that backward has pushed out of cache: fetch a
     * few rows ahead (each row's cache lines of w, m and v). */
    const int64_t ahead = 8, line = 64 / (int64_t)sizeof(float);
    const float a1 = one_minus_beta1, a2 = one_minus_beta2;
    for (int64_t j = 0; j < n; j++) {
        if (j + ahead < n) {
            const int64_t next = touched[j + ahead] * dim;
            for (int64_t d = 0; d < dim; d += line) {
                __builtin_prefetch(w + next + d, 1);
                __builtin_prefetch(m + next + d, 1);
                __builtin_prefetch(v + next + d, 1);
            }
        }
        const int64_t row = touched[j];
        slot[row] = -1;
        const float *g = scratch + j * dim;
        float *wr = w + row * dim, *mr = m + row * dim, *vr = v + row * dim;
        for (int64_t d = 0; d < dim; d++) {
            const float gd = g[d];
            const float md = mr[d] + (gd - mr[d]) * a1;
            const float vd = vr[d] + (gd * gd - vr[d]) * a2;
            mr[d] = md;
            vr[d] = vd;
            wr[d] -= step_size * (md / (sqrtf(vd) + eps));
        }
    }
    return n;
}
