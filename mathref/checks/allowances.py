"""What each exercise allows beyond the elementary PyTorch operations (gate.ELEMENTARY), as
data: ``ops`` (aten operator names: what the statement names as allowed; composites and their
kernels both listed), ``mathref`` (the course's modules whose code the answer runs: the parts
the exercise hands in, or helpers its statement allows), ``modules`` (third-party packages the
statement allows). An exercise absent here allows the elementary operations only, no mathref
code, no NumPy. Each line says why."""

SOFTMAX = ("softmax", "_softmax")
LOG_SOFTMAX = ("log_softmax", "_log_softmax", "logsumexp")
EIGENVALUES = ("linalg_eigvalsh", "linalg_eigh", "_linalg_eigh", "linalg_svdvals", "_linalg_svd",
               "linalg_eigvals", "linalg_eig", "linalg_matrix_norm", "linalg_norm")
ATTENTION_HELPERS = ("mathref.attention", "mathref._validation")
POSITIONS = ("mathref.positions", "mathref._validation")
# complex numbers: made (complex, polar, view_as_complex), taken apart (view_as_real, imag,
# angle; real is elementary) and conjugated (conj, conj_physical), as torch.imag(z) and z.imag
# are the same part
COMPLEX = ("complex", "polar", "view_as_real", "view_as_complex", "imag", "angle", "_conj", "conj",
           "conj_physical", "conj_physical_", "_conj_physical")
SILU = ("silu", "silu_")
EMBEDDING = ("embedding",)
MATMUL = ("linear", "inner")
CROSS_ENTROPY = ("cross_entropy_loss", "nll_loss", "nll_loss_forward", "nll_loss_nd",
                 "nll_loss2d_forward")
FOREACH = tuple(f"_foreach_{op}{inplace}" for op in (
    "add", "sub", "mul", "div", "addcmul", "addcdiv", "sqrt", "lerp", "neg", "reciprocal",
    "pow", "maximum", "minimum", "abs") for inplace in ("", "_")) + ("_foreach_copy_",)
# a training step's backward pass runs the backward kernels of what its forward ran
BACKWARD = ("nll_loss_backward", "_log_softmax_backward_data", "_softmax_backward_data",
            "silu_backward", "tanh_backward", "embedding_backward", "embedding_dense_backward",
            "nll_loss2d_backward")

ALLOWANCES = {
    # the statements allow an eigenvalue routine: the exercise is the formula from λ_min, λ_max
    # (it asks for no gradient: autograd there is a search for η); and the trace, a sum of the
    # diagonal, as in ch02-max-stable-lr: 2/tr H is a wrong answer the checker names, not a
    # shortcut
    "ch01-best-constant-step": dict(ops=EIGENVALUES + ("trace",),
                                    allows="an eigenvalue routine and torch.trace",
                                    no_autograd_because="this exercise asks for η* and ρ from the "
                                    "eigenvalues, not for a search for η by autograd"),
    # (the trace, a sum of the diagonal, as well: 2/tr H is a wrong answer, not a shortcut;
    # view_as_real only reinterprets the eigenvalues' memory as (real, imaginary) pairs)
    "ch02-max-stable-lr": dict(ops=EIGENVALUES + ("trace", "view_as_real"),
                               allows="an eigenvalue routine and torch.trace"),
    # ‖g‖ by any name: the Frobenius norm of a matrix-shaped gradient is its Euclidean length
    # (its other orders too, which run an SVD: they give a vector of the wrong length)
    "ch02-steepest-descent": dict(ops=("linalg_matrix_norm", "linalg_norm", "linalg_svdvals",
                                       "_linalg_svd", "_linalg_check_errors"),
                                  allows="torch.linalg.norm and matrix_norm"),
    # least squares on the design matrix (lstsq, pinv, QR, SVD: only on the matrix it was
    # given, by the exercise's own rule), and LU, eigh and det, which the statement lets solve
    # the normal equations so that its ill-conditioned case fails them on accuracy. solve, inv
    # and cholesky are refused by name (the statement says so): not here either, so that
    # torch.ops.aten's names for them are refused too
    "ch02-least-squares": dict(
        ops=("linalg_lstsq", "linalg_pinv", "linalg_qr", "linalg_solve_triangular",
             "triangular_solve", "_linalg_svd", "linalg_svd", "linalg_lu_factor",
             "linalg_lu_factor_ex", "linalg_lu_solve", "linalg_lu", "lu_unpack", "linalg_eigh",
             "_linalg_eigh", "linalg_eigvalsh", "linalg_det", "_linalg_det", "_linalg_check_errors",
             # singular values (a condition number) and QR in LAPACK's form, on the design matrix
             "linalg_svdvals", "geqrf", "linalg_householder_product", "orgqr", "ormqr"),
        mathref=("mathref.linear_regression",),
        allows="lstsq, pinv, QR and SVD on the design matrix, solve_triangular, and LU, eigh "
               "and det (torch.linalg.solve, inv and cholesky are refused)"),
    # the SVD, the one factorization of ch02-ridge-svd (svdvals too: σ alone; matrix_rank, a
    # count of σ, chapter 2's fourth read, L-c). Every solver of the ridge system, lstsq and pinv
    # of the stacked matrix included, is not in the list. (The checker allows the three on X
    # itself only: mathref.checks.ch02._on_x_itself)
    "ch02-ridge-svd": dict(ops=("linalg_svd", "_linalg_svd", "svd", "linalg_svdvals",
                                "linalg_matrix_rank", "_linalg_check_errors"),
                           allows="torch.linalg.svd (and torch.svd, torch.linalg.svdvals, "
                                  "torch.linalg.matrix_rank)"),
    # σ from mathref.nn, the chapter's own forward pass, or as torch.special.expit (torch.sigmoid
    # is elementary); no other activation's function
    "ch03-sigmoid-derivative": dict(ops=("special_expit",), mathref=("mathref.nn",),
                                    allows="torch.sigmoid (or torch.special.expit) and "
                                           "mathref.nn.sigmoid"),
    # (the matrix products by any name, as chapter 4's VJP allows them: F.linear(X, W1.T, b1) is
    # XW₁ + b₁, and F.linear(δ₂, W2) and torch.inner(δ₂, W2) are δ₂W₂ᵀ)
    "ch03-two-layer-backward": dict(ops=("special_expit", "linear", "inner"),
                                    mathref=("mathref.nn",),
                                    allows="torch.sigmoid (or torch.special.expit), F.linear, "
                                           "torch.inner, and mathref.nn's forward pass and "
                                           "activations"),
    # (chapter 4: σ by either name, as in chapter 3; the products of the VJP by any name:
    # F.linear(δ, W) is δWᵀ and torch.inner(δ, W) the same product)
    "ch04-sigmoid-backward": dict(ops=("special_expit",),
                                  allows="torch.sigmoid (or torch.special.expit)"),
    "ch04-linear-tanh-vjp": dict(ops=("linear", "inner"), mathref=("mathref.nn",),
                                 allows="F.linear, torch.inner, and mathref.nn's forward pass "
                                        "and activations"),
    # (chapter 3's mathref.nn.tanh and tanh_grad too, as in ch04-linear-tanh-vjp: what the
    # exercise asks for is the order of the factors; it asks for a Jacobian–vector product, so
    # a refusal of autograd says that, not "the gradient")
    "ch04-two-layer-jvp": dict(ops=("linear", "inner"), mathref=("mathref.nn",),
                               allows="F.linear and torch.inner (matrix products by any name), "
                                      "and mathref.nn's forward pass and activations",
                               no_autograd_because="this exercise asks for the Jacobian–vector "
                                                   "product by hand, without autograd"),
    "ch04-silu-backward": dict(ops=("special_expit",),
                               allows="torch.sigmoid (or torch.special.expit)"),
    # the loss's gradient is softmax − one-hot (either softmax, and one_hot, allowed); the
    # lookup's forward by E[ids] or F.embedding (its backward kernel is refused by name)
    "ch04-embedding-cross-entropy-backward": dict(
        ops=SOFTMAX + LOG_SOFTMAX + ("special_softmax", "one_hot") + EMBEDDING,
        allows="torch.softmax (or torch.special.softmax), log_softmax, one_hot and F.embedding"),
    # counting in plain Python or NumPy
    "ch03-parameter-count": dict(modules=("numpy",), allows="NumPy"),
    # the gradient is softmax − one-hot: both allowed
    "ch05-ce-gradient": dict(ops=SOFTMAX + ("one_hot",), allows="torch.softmax and one_hot"),
    # one_hot: cell 29's form; NaN at the padding, then the NaN-ignoring mean or sum, is a mask
    # too (nanmean runs logical_not_)
    "ch05-lm-loss": dict(ops=SOFTMAX + LOG_SOFTMAX + ("one_hot", "nanmean", "nansum",
                                                      "logical_not_"),
                         allows="log_softmax, logsumexp, one_hot and torch.nanmean/nansum"),
    # the NaN-ignoring reductions are reductions (chapter 5's eighth read, L3)
    "ch05-perplexity": dict(ops=("nanmean", "nansum", "logical_not_"),
                            allows="torch.nanmean/nansum"),
    "ch05-logsumexp": dict(ops=("nansum",), allows="torch.nansum"),
    # ‖g‖ by any name (matrix_norm's SVD-based orders stay refused: _linalg_svd is not here),
    # and the torch._foreach_* arithmetic and norm, as clip_grad_norm_ itself is written
    "ch06-clip-global-norm": dict(ops=("linalg_norm", "linalg_matrix_norm", "_foreach_norm")
                                  + FOREACH,
                                  allows="torch.linalg.norm, vector_norm and matrix_norm, and "
                                         "the torch._foreach_* arithmetic and norm"),
    # the elementwise arithmetic applied to a list of tensors at once (torch._foreach_*: what
    # foreach=True runs, cell 31's "same arithmetic"); the fused kernels and the optimizers'
    # own functions stay refused by name
    "ch06-adam-step": dict(ops=FOREACH, allows="the torch._foreach_* arithmetic"),
    "ch06-adamw-step": dict(ops=FOREACH, allows="the torch._foreach_* arithmetic"),
    # Muon's normalization, the Frobenius norm (also as √tr(GGᵀ)), and matrix powers
    # (matrix_power: a negative power runs linalg_inv, not here; multi_dot is elementary). SVD,
    # eigh, QR and torch's own Newton–Schulz stay refused (not here, and forbidden by name)
    "ch06-newton-schulz": dict(ops=("linalg_matrix_norm", "linalg_norm", "trace",
                                    "linalg_matrix_power", "matrix_power"),
                               allows="the Frobenius norm, torch.trace and matrix_power"),
    # an expectation by quadrature, in NumPy or PyTorch
    "ch07-tanh-fixed-point": dict(ops=("trapezoid", "trapz"), modules=("numpy",),
                                  allows="quadrature (torch.trapezoid, NumPy)"),
    # the statement forbids running BatchNorm only: any way to a per-feature mean and unbiased
    # variance is fine, including the covariance matrix's diagonal and the NaN-ignoring means
    # ‖x‖/√d is the RMS (section 8.6): the vector norm by either name (vector_norm is elementary)
    "ch08-layer-norm": dict(ops=("linalg_norm",), allows="torch.linalg.norm of a vector"),
    "ch08-rms-norm": dict(ops=("linalg_norm",), allows="torch.linalg.norm of a vector"),
    "ch08-running-stats": dict(ops=("cov", "nanmean", "nansum", "logical_not_"),
                               allows="torch.cov and torch.nanmean/nansum"),
    # q Kᵀ by any name of a product (as in ch09-unit-distance), the softmax by any name
    "ch09-soft-lookup": dict(ops=SOFTMAX + LOG_SOFTMAX + ("special_softmax", "inner", "linear"),
                             allows="torch.softmax (or torch.special.softmax), torch.inner and "
                                    "F.linear"),
    # torch.linalg.norm of vectors: the norm the statements build with, by its recommended name
    "ch09-cosine-from-dot": dict(ops=("linalg_norm",), allows="torch.linalg.norm"),
    "ch09-mips-to-nn": dict(ops=("linalg_norm",), allows="torch.linalg.norm"),
    # the product by any name: F.linear(one_hot, E.T) is section 10.5's "linear layer without
    # bias", torch.inner(one_hot, E.T) a product too (neither selects rows by index)
    "ch10-one-hot-embedding": dict(ops=("one_hot", "linear", "inner"),
                                   allows="F.one_hot, F.linear and torch.inner"),
    # (mathref._validation: the argument checks BPETokenizer's own methods run, a token_bytes
    # sanity check in a correct answer included)
    "ch10-bpe-encode": dict(mathref=("mathref.tokenizers", "mathref._validation"),
                            allows="mathref.tokenizers' pre-tokenization pattern"),
    # the mask may be written from its definition by index: triu_indices/tril_indices create the
    # (row, column) pairs above or below the diagonal, as arange does the positions
    "ch11-causal-mask": dict(ops=("triu_indices", "tril_indices"),
                             allows="torch.triu_indices and torch.tril_indices"),
    "ch11-attention": dict(ops=SOFTMAX + LOG_SOFTMAX, allows="torch.softmax (or log_softmax, logsumexp)"),
    "ch11-gqa-backward": dict(ops=SOFTMAX, mathref=ATTENTION_HELPERS, allows="torch.softmax"),
    # the per-head attention may be PyTorch's: the exercise is the head split and merge. On a
    # 3-D slice (B, T, d_k) of one head, SDPA takes its math path, whose softmax is
    # aten._safe_softmax (a softmax that gives 0 to a fully masked row)
    "ch11-multi-head": dict(
        ops=SOFTMAX + ("_safe_softmax", "scaled_dot_product_attention",
                       "_scaled_dot_product_attention_math",
                       "_scaled_dot_product_flash_attention_for_cpu"),
        allows="torch.softmax and F.scaled_dot_product_attention for each head"),
    # a width rounded up from 8d/3: exact fractions are a fair way to round
    "ch13-swiglu-width": dict(modules=("fractions",), allows="exact fractions"),
    # sin a and cos a as the parts of exp(i·a): the statement allows PyTorch, its complex
    # numbers included (.real and .imag run view_as_real); cmath, a C module, stays refused
    "ch12-sinusoidal-entry": dict(ops=COMPLEX, allows="PyTorch's complex numbers"),
    # rotations as complex multiplication
    "ch12-rope-half": dict(ops=COMPLEX,
                           mathref=POSITIONS, allows="complex numbers and mathref.positions"),
    # F.linear(y, W_q.T) is y W_q (a product, as in ch10 and ch15); log_softmax(-1).exp() is
    # the softmax (as in ch11-attention)
    "ch13-cross-attention": dict(ops=SOFTMAX + LOG_SOFTMAX + ("linear",), mathref=ATTENTION_HELPERS,
                                 allows="torch.softmax (or log_softmax), F.linear and mathref's "
                                        "mask helpers"),
    # the sub-layers are handed in: running them runs mathref's modules and their operators
    "ch13-pre-norm-block": dict(
        ops=SOFTMAX + ("dropout", "linear", "layer_norm", "native_layer_norm", "gelu", "silu"),
        mathref=("mathref.transformer", "mathref.norm") + ATTENTION_HELPERS,
        allows="calling the sub-layers it is given"),
    # the softmax by any name, the chapter's own (mathref.losses.softmax) included; RoPE by
    # any method, the complex product chapter 12 teaches included (as in ch12-rope-half and
    # ch16-rope: the checker's own reference is written so)
    "ch14-rope-decode-step": dict(ops=SOFTMAX + LOG_SOFTMAX + ("special_softmax",) + COMPLEX,
                                  mathref=POSITIONS + ("mathref.losses",),
                                  allows="torch.softmax (torch.special.softmax, "
                                         "mathref.losses.softmax, log_softmax(...).exp()), "
                                         "complex numbers and mathref.positions"),
    # the softmax is increasing: keeping the k most probable is keeping the k largest logits
    "ch14-top-k": dict(ops=SOFTMAX + LOG_SOFTMAX + ("special_softmax",),
                       allows="torch.topk, torch.softmax and log_softmax"),
    # step returns log-probabilities already: log_softmax or logsumexp on them changes nothing
    # and is no shortcut (chapter 14's second delta read, L-A: an answer that normalized them
    # again was refused)
    "ch14-beam-search": dict(ops=SOFTMAX + LOG_SOFTMAX + ("special_softmax",),
                             allows="torch.softmax, log_softmax and logsumexp"),
    # U Vᵀ by any name of a matrix product (torch.inner(U, V) and F.linear(U, V) are U Vᵀ)
    "ch09-unit-distance": dict(ops=("inner", "linear"), allows="torch.inner and F.linear"),
    # q kᵀ by any name of a matrix product (F.linear(q, k) and torch.inner(q, k) are q kᵀ)
    "ch15-flash-tile-step": dict(ops=("linear", "inner"), allows="F.linear and torch.inner"),
    # chapter 16 allows any PyTorch tensor operation but the ready-made layers, optimizers and
    # the course's model (refused by name); the parts a checker hands in run the same operators.
    # A matrix product by any name: F.linear(x, W) is x Wᵀ and torch.inner(x, W) the same (the
    # weights have nn.Linear's layout), and F.one_hot(idx, V) @ E is the embedding lookup
    # (chapter 16's read, M1: right answers with F.linear were refused)
    # torch.linalg.norm by its own name (torch.norm and torch.linalg.vector_norm already pass)
    "ch16-rms-norm": dict(ops=MATMUL + ("linalg_norm",),
                          allows="F.linear, torch.inner and torch.linalg.norm"),
    "ch16-rope": dict(ops=COMPLEX, allows="complex numbers"),
    "ch16-swiglu": dict(ops=SILU + MATMUL, allows="F.silu, F.linear and torch.inner"),
    # the statement refuses only torch.optim and mathref's optimizers: the torch._foreach_*
    # arithmetic (what PyTorch's AdamW runs) is allowed, as in chapter 6's ch06-adamw-step
    "ch16-adamw": dict(ops=FOREACH, allows="the torch._foreach_* arithmetic"),
    "ch16-clip": dict(ops=("linalg_norm",), allows="torch.linalg.norm"),
    # (the softmax as exp(s − logsumexp(s)) too: the third red team's right answer)
    "ch16-attention": dict(ops=SOFTMAX + LOG_SOFTMAX + MATMUL,
                           allows="torch.softmax (or log_softmax, logsumexp), F.linear and "
                                  "torch.inner"),
    "ch16-train-step": dict(ops=SOFTMAX + LOG_SOFTMAX + SILU + EMBEDDING + CROSS_ENTROPY + BACKWARD
                            + MATMUL + ("one_hot",),
                            allows="torch.softmax, F.cross_entropy's log-softmax, F.silu, "
                                   "F.linear, torch.inner and F.one_hot"),
    "ch16-block": dict(ops=SOFTMAX + SILU + MATMUL,
                       allows="torch.softmax, F.silu, F.linear, torch.inner and the parts it is "
                              "given"),
    "ch16-gpt-forward": dict(ops=SOFTMAX + SILU + EMBEDDING + MATMUL + ("one_hot",),
                             allows="torch.softmax, F.silu, F.embedding, F.linear, torch.inner, "
                                    "F.one_hot and the parts it is given"),
    # step(ids) runs mathref.GPT with its cache (mathref's generate/sample_next refused by name)
    "ch16-generate": dict(ops=SOFTMAX + LOG_SOFTMAX + SILU + EMBEDDING + ("dropout", "linear"),
                          mathref=("mathref.gpt", "mathref.transformer", "mathref.norm")
                          + ATTENTION_HELPERS + POSITIONS,
                          allows="torch.softmax and the step function it is given"),
}
