"""Typical wrong answers to chapter 15's exercises: each must fail its checker."""
import torch


def kv_without_factor_two(n_layers, batch, n_kv_heads, seq_len, d_head, bytes_per_element):
    return n_layers * batch * n_kv_heads * seq_len * d_head * bytes_per_element   # keys only


def kv_in_bits(n_layers, batch, n_kv_heads, seq_len, d_head, bytes_per_element):
    return 2 * n_layers * batch * n_kv_heads * seq_len * d_head * bytes_per_element * 8


def kv_without_batch(n_layers, batch, n_kv_heads, seq_len, d_head, bytes_per_element):
    return 2 * n_layers * n_kv_heads * seq_len * d_head * bytes_per_element


def crossover_always_6d(d, d_ff):
    return 6 * d


def crossover_multiply_adds_mixed(d, d_ff):
    return 4 * d + 2 * d_ff      # matrices in FLOPs, attention in multiply-adds


def crossover_ffn_only(d, d_ff):
    return d_ff


def flops_forward_only(n_params, n_layer, d_model, T):
    return 2 * n_params + 4 * n_layer * d_model * T


def flops_without_attention(n_params, n_layer, d_model, T):
    return 6 * n_params


def flops_attention_forward_only(n_params, n_layer, d_model, T):
    return 6 * n_params + 4 * n_layer * d_model * T


def merge_without_rescaling(m1, l1, acc1, m2, l2, acc2):
    return torch.maximum(torch.as_tensor(m1), torch.as_tensor(m2)), l1 + l2, acc1 + acc2


def merge_sign_flipped(m1, l1, acc1, m2, l2, acc2):
    m = torch.maximum(torch.as_tensor(m1), torch.as_tensor(m2))
    a, b = torch.exp(m - m1), torch.exp(m - m2)
    return m, a * l1 + b * l2, a * acc1 + b * acc2


def merge_acc_not_rescaled(m1, l1, acc1, m2, l2, acc2):
    m = torch.maximum(torch.as_tensor(m1), torch.as_tensor(m2))
    a, b = torch.exp(m1 - m), torch.exp(m2 - m)
    return m, a * l1 + b * l2, acc1 + acc2


def scale_no_reset_on_overflow(scale, good_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 0.5, good_steps
    good_steps += 1
    if good_steps >= growth_interval:
        return scale * 2.0, 0
    return scale, good_steps


def scale_grows_one_step_late(scale, good_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 0.5, 0
    if good_steps == growth_interval:
        return scale * 2.0, 0
    return scale, good_steps + 1


def scale_never_backs_off(scale, good_steps, found_inf, growth_interval):
    if found_inf:
        return scale, 0
    good_steps += 1
    if good_steps == growth_interval:
        return scale * 2.0, 0
    return scale, good_steps


def _tile_scores(q, k_tile, scale=True):
    return q @ k_tile.T / (q.shape[-1] ** 0.5 if scale else 1.0)


def tile_acc_not_rescaled(q, k_tile, v_tile, m, l, acc):
    s = _tile_scores(q, k_tile)
    m_new = torch.maximum(m, s.max(-1).values)
    p = torch.exp(s - m_new[:, None])
    return m_new, l * torch.exp(m - m_new) + p.sum(-1), acc + p @ v_tile


def tile_without_scale(q, k_tile, v_tile, m, l, acc):
    s = _tile_scores(q, k_tile, scale=False)
    m_new = torch.maximum(m, s.max(-1).values)
    c, p = torch.exp(m - m_new), torch.exp(s - m_new[:, None])
    return m_new, l * c + p.sum(-1), acc * c[:, None] + p @ v_tile


def tile_max_of_tile_only(q, k_tile, v_tile, m, l, acc):
    s = _tile_scores(q, k_tile)
    m_new = s.max(-1).values                   # forgets the earlier tiles' maximum
    c, p = torch.exp(m - m_new), torch.exp(s - m_new[:, None])
    return m_new, l * c + p.sum(-1), acc * c[:, None] + p @ v_tile


def tile_rescale_sign_flipped(q, k_tile, v_tile, m, l, acc):
    s = _tile_scores(q, k_tile)
    m_new = torch.maximum(m, s.max(-1).values)
    c, p = torch.exp(m_new - m).nan_to_num(0.0, posinf=0.0), torch.exp(s - m_new[:, None])
    return m_new, l * c + p.sum(-1), acc * c[:, None] + p @ v_tile


def tile_no_max_subtracted(q, k_tile, v_tile, m, l, acc):
    s = _tile_scores(q, k_tile)               # exp(s) without the running max: overflows at 1000
    return torch.maximum(m, s.max(-1).values), l + torch.exp(s).sum(-1), acc + torch.exp(s) @ v_tile


WRONG_ANSWERS = {
    "ch15-kv-cache-bytes": [kv_without_factor_two, kv_in_bits, kv_without_batch],
    "ch15-crossover-length": [crossover_always_6d, crossover_multiply_adds_mixed,
                              crossover_ffn_only],
    "ch15-flops-per-token": [flops_forward_only, flops_without_attention,
                             flops_attention_forward_only],
    "ch15-merge-softmax-states": [merge_without_rescaling, merge_sign_flipped,
                                  merge_acc_not_rescaled],
    "ch15-loss-scale-update": [scale_no_reset_on_overflow, scale_grows_one_step_late,
                               scale_never_backs_off],
    "ch15-flash-tile-step": [tile_acc_not_rescaled, tile_without_scale, tile_max_of_tile_only,
                             tile_rescale_sign_flipped, tile_no_max_subtracted],
}
