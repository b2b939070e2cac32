#!/usr/bin/python3
"""Independent numpy reference ("oracle") for the architecture fixtures: Hugging Face folders as transformers runs
them and GGUF files as llama.cpp runs them, under posenc's eval protocol and llama.cpp's `llama-perplexity` protocol.

Written from transformers' modeling code (models/*/modeling_*.py, modeling_rope_utils.py) and llama.cpp's
(src/models/*.cpp, llama-model.cpp, llama-context.cpp, llama-graph.cpp, llama-vocab.cpp, ggml rope_yarn,
tools/perplexity); no code copied, and independent of posenc's C++ model code.  numpy only (plus the sentencepiece
library for tokenizer.model files and the `regex` module for byte-level BPE pre-tokenizers; Debian python3-regex).

Regenerate the references (run from the repository root; SHARED = the shared fixture folder, the one CMake calls
POSENC_SHARED_DIR, holding models/ and models/arch/):

    /usr/bin/python3 tests/oracle/arch_oracle.py check --shared SHARED --json /tmp/arch_check.json
        compares every row of tests/data/arch_ppl.json (llama.cpp's `rows`, `also`, `hf_faithful_rows`,
        `hf_tokenization_row`, and the folders' `hf_rows`) and the llama-family numbers of
        tests/data/formats_ppl.json with this oracle; prints the largest relative difference per fixture.
        About 30 minutes on 2 cores (10 for the architecture fixtures).  Each llama.cpp row runs with exact math
        and with llama.cpp's float details emulated (numerics "ggml": the fp16 GELU table, bf16 activations in
        BF16 matrix products, Q8_0 activations in Q8_0 products); BF16 / Q8_0 rows also with those roundings and
        float64 sums ("ggml64"): the spread between the two is how far summation order alone moves a model whose
        activations are rounded, i.e. the precision to which llama.cpp's BF16 / Q8_0 numbers can be reproduced.
    /usr/bin/python3 tests/oracle/arch_oracle.py reference --shared SHARED --out tests/data/arch_ref.json
        writes the posenc-protocol references (every fixture folder and its F32 GGUF, the llama family, the
        variant cases) plus this oracle's llama-perplexity rows.  About 65 minutes on 2 cores (--n 16384; the two
        llama-mini-rand entries, vocab 32000, take 10 minutes each).  --only LABEL... recomputes just those entries
        (fixture labels as in the file, NAME-BF16.gguf for the BF16 = F32 check, `variants`).
    /usr/bin/python3 tests/oracle/arch_oracle.py protocols --out tests/data/protocol_ref.json
        the sliding / truncate / llama-perplexity references of stories260K (yarn_eval, llama_perplexity below;
        no shared folder needed).  About 2 minutes on 2 cores.
    /usr/bin/python3 tests/oracle/arch_oracle.py eval --model SHARED/models/arch/qwen3 --ctx 64 256 --methods native
        one model, ad hoc.

================================================================================================== PROTOCOLS
Text: data/text/tinystories_val_stories.txt, read as bytes and decoded as UTF-8.

posenc (posenc eval's default protocol; the one of ref_llama2c.py, restated):
  1. Documents: the text is cut at every line that is exactly "<|endoftext|>" (the separator line is dropped; each
     piece loses one leading and one trailing "\n"); without such a line the whole text is one document.  Each
     document -> [BOS] + encode(document) when the vocabulary adds a BOS, else encode(document) alone; the stream is
     the concatenation in file order.  Whether a BOS is added: a GGUF says it with tokenizer.ggml.add_bos_token
     (absent: llama.cpp's default, true for the SentencePiece `llama` vocabulary, false for byte-level `gpt2`); a
     folder as HF's tokenizer(text) does: tokenizer_config.json add_bos_token (LlamaTokenizer / GemmaTokenizer
     default true, GPT2Tokenizer / GPTNeoXTokenizer / Qwen2Tokenizer / PreTrainedTokenizerFast default false),
     and never when bos_token is null (an add_bos_token true with a null bos_token is an error).
     encode = the file's tokenizer without special tokens: tokenizer.model through the sentencepiece library;
     tokenizer.json byte-level BPE (its normalizer NFC, its Split regex, ByteLevel bytes, its merges by rank);
     GGUF `llama` vocab = llama.cpp's SentencePiece-BPE (bigram merges by score, leftmost on ties, dummy-prefix
     space iff tokenizer.ggml.add_space_prefix (default true), byte fallback <0xXX>); GGUF `gpt2` vocab =
     llama.cpp's byte-level BPE with the split regex llama.cpp uses for tokenizer.ggml.pre (gpt-2, qwen2, dbrx,
     smaug-bpe) and no normalization.  stories260K: llama2.c's encode with tok512.bin.
  2. Windows: the first N+1 tokens (N = 16384 unless said otherwise; N a multiple of every L); window w has inputs
     tokens[wL : wL+L] and targets tokens[wL+1 : wL+L+1]; positions restart at 0 in every window; every prediction
     is scored; NLL = -log softmax(logits)[target] (float64); ppl = exp(mean NLL); nll_se = sample standard
     deviation (n-1) of the windows' mean NLLs / sqrt(n windows).  Buckets by in-window position t of the input
     token: [0, L0/2), [L0/2, L0), [L0, 2 L0), [2 L0, 4 L0), ..., only those inside [0, L).
  3. Methods at context L, s = max(1, L / L0), L0 = the file's training length (GGUF
     rope.scaling.original_context_length, else context_length; folder: original_max_position_embeddings (in
     rope_scaling / rope_parameters, else top level), else max_position_embeddings; GPT-2: n_positions):
       native  the file's own positional configuration exactly (as transformers / llama.cpp run it).
       none    each changed layer (below) gets plain RoPE at its own theta (the file's scaling, factors and
               attention factor removed); inv_freq_i = theta^(-2i/d), d = the layer's rotary dimensions.
       linear  plain RoPE at position t/s.
       ntk     theta' = theta * s^(d/(d-2)).
       yarn    transformers' yarn (beta_fast 32, beta_slow 1, truncate): corr(r) = d ln(L0/(2 pi r)) / (2 ln theta),
               lo = max(floor(corr(32)), 0), hi = min(ceil(corr(1)), d-1), hi += 0.001 if lo == hi,
               ramp_i = clamp((i-lo)/(hi-lo), 0, 1), inv_i = inv_freq_i/s * ramp_i + inv_freq_i * (1-ramp_i),
               cos and sin multiplied by 0.1 ln s + 1.
     The layers a method other than native changes (none included): every layer that has RoPE, except that in a
     model whose RoPE layers include both sliding-window layers and full-attention layers, the sliding ones keep
     the file's own RoPE.  A layer is sliding when the file gives it a window W, whatever W is: a W >= L masks
     nothing but still counts as sliding for this rule.  NoPE layers stay NoPE and do not count.  So where every
     RoPE layer slides (Mistral; Phi-3, whose window of 262144 covers any context; llama.cpp's gemma3 with its
     default pattern 6 on a model of at most 5 layers) or none does, every RoPE layer changes; Gemma 2, Gemma 3
     (HF pattern) and a Qwen2 / Qwen3 with use_sliding_window and 0 < max_window_layers < num_hidden_layers
     change only their full-attention layers; SmolLM3's windows sit on NoPE layers only, so every one of its RoPE
     layers changes.
     GPT-2's learned table wpe (n_positions rows): native / none only for L <= n_positions (beyond: an error naming
     the limit); ntk / yarn: an error (no RoPE); linear reads the table at p = t/s for each input position t in
     [0, L), s = max(1, L / n_positions), p in float64: with i = floor(p) and f = p - i rounded to float32, the
     row is wpe[i] * (1 - f) + wpe[i+1] * f in float32 (1 - f, each product and the sum rounded to float32), the
     row past the end repeating the last one: for i = n_positions - 1 the row is wpe[n_positions - 1] exactly
     (f taken as 0).  p < n_positions, so no row further out is read; at L <= n_positions (s = 1) linear equals
     native.  The row takes wpe[t]'s place in the input sum (token embedding + position row).

llama-perplexity (llama.cpp tools/perplexity, as in tests/data/arch_ppl.json `about`):
  the whole text tokenized as one string as plain text (special tokens such as <|endoftext|> not parsed), a BOS
  first only where the vocabulary adds one; chunk k = tokens[kC : (k+1)C], its first token replaced by BOS where
  the vocabulary adds one, positions 0..C-1 (GGUF: llama.cpp's context is C padded to a multiple of 256, which
  only matters where llama.cpp reads it: LongRoPE's long/short choice); logits at positions C/2 .. C-2 score
  tokens C/2+1 .. C-1; the first K = 8 chunks; ppl = exp(mean NLL), +- = ppl * sqrt((mean(v^2) - mean(v)^2) /
  (count-1)), running[k] = exp(mean NLL over chunks 0..k).

sliding and truncate (YaRN's eval/perplexity.py compute_perplexity, restated in yarn_windows / yarn_eval):
  documents as protocol 1 cuts them, each tokenized without special tokens; windows [BOS] + L-1 document tokens
  (L tokens where no BOS is added) starting every S tokens, each scoring the tokens past the previous window's end
  (the first window all of its tokens, BOS predicting the first); truncate: one window per document, its first L-1
  tokens; ppl = exp(mean of the windows' mean NLLs), or with average "tokens" exp(mean over every scored token).
  Documents: in file order, those of at least min_doc_tokens tokens, until their tokens reach the budget N.

================================================================================================== FILE SEMANTICS
Folder (transformers): config.json of the model_type; RoPE from v5 rope_parameters (flat, or nested per layer type
  with layer_types) or v4 rope_theta + rope_scaling (Gemma 3 v4: sliding layers at rope_local_base_freq, default
  RoPE); partial_rotary_factor inside or outside the parameters (GPT-NeoX rotary_pct); head_dim when set; layer types
  from layer_types, else per family (Gemma 2: even layers slide; Gemma 3: layer i slides iff (i+1) %
  sliding_window_pattern != 0, default 6; Qwen2 / Qwen3: iff use_sliding_window and i >= max_window_layers; Mistral,
  Phi-3: every layer when sliding_window is set; SmolLM3: NoPE where no_rope_layers[i] == 0, else every
  no_rope_layer_interval-th layer); LongRoPE: long factors iff the forward's length > original_max_position_embeddings,
  attention factor sqrt(1 + ln(max_pos / orig) / ln orig); Gemma norms x * (1 + w), embeddings * sqrt(hidden),
  scores * query_pre_attn_scalar^-0.5, soft-caps; GPT-NeoX `gelu` = erf GELU, `gelu_new` / `gelu_pytorch_tanh` =
  tanh GELU; transformers' rotate_half pairs (i, i + d/2).
GGUF (llama.cpp): generic keys and defaults (rope.freq_base 10000, rope.dimension_count = head_dim,
  original_context_length = context_length, scaling type linear, factor 0 = none); pairs interleaved (ggml NORM) for
  llama and smollm3, (i, i + d/2) (NEOX) for qwen2, qwen3, gemma2, gemma3, phi3, olmo2, gptneox; llama and qwen2 run
  no window (the key is not read); phi3's window is ignored; gemma2 / gemma3 slide where il % P < P-1, P =
  attention.sliding_window_pattern, default 2 (gemma2) / 6 (gemma3: so 4 layers all slide); gemma3's sliding layers
  at rope.freq_base_swa (default 10000) without scaling; smollm3 NoPE where (il+1) % 4 == 0; LongRoPE factors
  rope_factors_long iff the context padded to 256 > original_context_length; rope_freqs divides inv_freq; YaRN
  (rope.scaling.type yarn): freq_scale = 1/factor, ext_factor 1, corr dims from original_context_length with
  beta_fast 32 / beta_slow 1 (the rope.scaling.yarn_* keys are not read for these architectures), magnitude
  (1 + 0.1 ln factor) * rope.scaling.attn_factor (attn_factor must be finite and > 0); every GELU the tanh form;
  gemma2 attention soft-cap 50 and final soft-cap 30 unless the keys say otherwise; scores scaled 1/sqrt(head_dim).

Forward: float32 matrices and activations (float64 for norm statistics, RoPE angles and the log-softmax), in
each family's own order of operations (one function per family's block below).  Default numerics are the exact
functions (tanh GELU, erf GELU where transformers uses it); --ggml-numerics only for comparing with llama.cpp's
printed numbers.
"""
import argparse
import hashlib
import heapq
import json
import math
import os
import struct
import sys
import time
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir))
TEXT = os.path.join(REPO, "data", "text", "tinystories_val_stories.txt")
SEP = "<|endoftext|>"
METHODS = ["native", "none", "linear", "ntk", "yarn"]


class OracleError(Exception):
    """A file or request this oracle refuses (the message names the field and the value)."""


# ============================================================================================== numeric helpers
def bf16_bits_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def round_to_bf16(x):
    """float32 -> nearest bfloat16 (ties to even), returned as float32 (ggml GGML_FP32_TO_BF16)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32).reshape(np.shape(x))


def round_to_q8_0(x):
    """ggml quantize_row_q8_0 of the last axis (blocks of 32), dequantized back to float32."""
    shp = x.shape
    b = x.reshape(-1, 32).astype(np.float32)
    amax = np.abs(b).max(axis=1, keepdims=True)
    d = amax / np.float32(127.0)
    inv = np.where(d > 0, np.float32(1.0) / np.where(d > 0, d, 1), 0).astype(np.float32)
    q = b * inv
    q = np.where(q >= 0, np.floor(q + 0.5), np.ceil(q - 0.5))      # roundf: half away from zero
    return (q * d.astype(np.float16).astype(np.float32)).astype(np.float32).reshape(shp)


def pad_to(n, k):
    return (n + k - 1) // k * k


# ============================================================================================== readers
def read_safetensors(path):
    """safetensors file -> {name: (float32 array, dtype name)}; BF16, F16 and F32 tensors."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        buf = raw[base + a:base + b]
        if t["dtype"] == "BF16":
            arr = bf16_bits_to_f32(np.frombuffer(buf, dtype="<u2"))
        elif t["dtype"] == "F16":
            arr = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif t["dtype"] == "F32":
            arr = np.frombuffer(buf, dtype="<f4").astype(np.float32)
        else:
            raise OracleError(f"{path}: tensor {name}: dtype {t['dtype']} not supported")
        out[name] = (arr.reshape(t["shape"]), t["dtype"])
    return out


GGUF_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGML_TYPES = {0: "F32", 1: "F16", 8: "Q8_0", 30: "BF16"}


class GGUF:
    """GGUF v3 reader: metadata of every type, tensors F32 / F16 / BF16 / Q8_0 as float32 numpy arrays whose shape is
    the ggml shape reversed (a weight [ne0 = in, ne1 = out] reads as (out, in), like a torch Linear weight).
    Each key/value keeps its raw bytes so that with_kv() can write a copy with keys replaced or added."""

    def __init__(self, path):
        self.path = path
        raw = self.raw = open(path, "rb").read()
        if raw[:4] != b"GGUF":
            raise OracleError(f"{path}: not a GGUF file")
        self.version, n_tensors, n_kv = struct.unpack_from("<IQQ", raw, 4)
        if self.version != 3:
            raise OracleError(f"{path}: GGUF version {self.version} (only 3)")
        off = 24
        self.kv, self.kv_type, self.kv_raw = {}, {}, []
        for _ in range(n_kv):
            start = off
            key, off = self._str(off)
            (t,) = struct.unpack_from("<I", raw, off)
            val, off = self._val(t, off + 4)
            self.kv[key], self.kv_type[key] = val, t
            self.kv_raw.append((key, raw[start:off]))
        tstart = off
        self.tensors = {}
        for _ in range(n_tensors):
            name, off = self._str(off)
            (nd,) = struct.unpack_from("<I", raw, off)
            dims = struct.unpack_from(f"<{nd}Q", raw, off + 4)
            t, o = struct.unpack_from("<IQ", raw, off + 4 + 8 * nd)
            off += 4 + 8 * nd + 12
            self.tensors[name] = (tuple(reversed(dims)), t, o)
        self.tinfo_raw = raw[tstart:off]
        self.alignment = int(self.kv.get("general.alignment", 32))
        self.data_start = pad_to(off, self.alignment)
        self.arch = self.kv.get("general.architecture")

    def _str(self, off):
        (n,) = struct.unpack_from("<Q", self.raw, off)
        return self.raw[off + 8:off + 8 + n].decode("utf-8", errors="surrogateescape"), off + 8 + n

    def _val(self, t, off):
        if t in GGUF_SCALAR:
            (v,) = struct.unpack_from(GGUF_SCALAR[t], self.raw, off)
            return v, off + struct.calcsize(GGUF_SCALAR[t])
        if t == 8:
            return self._str(off)
        if t == 9:
            at, n = struct.unpack_from("<IQ", self.raw, off)
            off += 12
            if at in GGUF_SCALAR:
                fmt = GGUF_SCALAR[at]
                sz = struct.calcsize(fmt)
                vals = list(np.frombuffer(self.raw, dtype=np.dtype(fmt), count=n, offset=off)) if n else []
                return [v.item() for v in vals], off + sz * n
            out = []
            for _ in range(n):
                v, off = self._val(at, off)
                out.append(v)
            return out, off
        raise OracleError(f"{self.path}: metadata value type {t} unknown")

    def key(self, name, default=None):
        """arch-prefixed key: key('rope.freq_base') reads '<arch>.rope.freq_base'."""
        return self.kv.get(f"{self.arch}.{name}", default)

    def has_tensor(self, name):
        return name in self.tensors

    def tensor_type(self, name):
        return GGML_TYPES.get(self.tensors[name][1], str(self.tensors[name][1]))

    def tensor(self, name):
        shape, t, o = self.tensors[name]
        n = int(np.prod(shape))
        at = self.data_start + o
        if t == 0:
            a = np.frombuffer(self.raw, dtype="<f4", count=n, offset=at)
        elif t == 1:
            a = np.frombuffer(self.raw, dtype="<f2", count=n, offset=at).astype(np.float32)
        elif t == 30:
            a = bf16_bits_to_f32(np.frombuffer(self.raw, dtype="<u2", count=n, offset=at))
        elif t == 8:
            blk = np.frombuffer(self.raw, dtype=np.dtype([("d", "<f2"), ("q", "i1", 32)]), count=n // 32, offset=at)
            a = (blk["q"].astype(np.float32) * blk["d"].astype(np.float32)[:, None]).reshape(-1)
        else:
            raise OracleError(f"{self.path}: tensor {name}: ggml type {t} not supported (F32, F16, BF16, Q8_0)")
        return a.astype(np.float32).reshape(shape)

    @staticmethod
    def encode_kv(key, t, value):
        kb = key.encode()
        head = struct.pack("<Q", len(kb)) + kb + struct.pack("<I", t)
        if t in GGUF_SCALAR:
            return head + struct.pack(GGUF_SCALAR[t], value)
        if t == 8:
            vb = value.encode()
            return head + struct.pack("<Q", len(vb)) + vb
        raise OracleError(f"writing metadata type {t} is not supported")

    def with_kv(self, changes):
        """Bytes of a copy with each (key, gguf type, value) of `changes` replacing the key in place or, if new,
        appended after the last key; tensor infos and data unchanged (data re-aligned after the new header)."""
        kvs = list(self.kv_raw)
        for key, t, value in changes:
            enc = self.encode_kv(key, t, value)
            for i, (k, _) in enumerate(kvs):
                if k == key:
                    kvs[i] = (key, enc)
                    break
            else:
                kvs.append((key, enc))
        head = b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(kvs)) + b"".join(r for _, r in kvs)
        head += self.tinfo_raw
        head += b"\0" * (pad_to(len(head), self.alignment) - len(head))
        return head + self.raw[self.data_start:]

    @classmethod
    def from_bytes(cls, data, label):
        obj = cls.__new__(cls)
        tmp = f"/tmp/arch_oracle_{os.getpid()}_{hashlib.sha256(data).hexdigest()[:12]}.gguf"
        with open(tmp, "wb") as f:
            f.write(data)
        try:
            obj.__init__(tmp)
        finally:
            os.unlink(tmp)
        obj.path = label
        return obj


# ============================================================================================== tokenizers
class SpmBpe:
    """SentencePiece-BPE merges over a piece list with scores: llama.cpp llm_tokenizer_spm (GGUF `llama` vocab) and
    llama2.c encode (tok512.bin).  Spaces become U+2581; a dummy-prefix space when add_space_prefix; symbols are
    UTF-8 characters; repeatedly the adjacent pair whose concatenation is a piece with the highest score merges
    (leftmost on ties); a final symbol that is no piece is split back along the merges that built it, else into
    its bytes' <0xXX> pieces."""

    def __init__(self, pieces, scores, add_space_prefix):
        self.pieces, self.scores = pieces, scores
        self.lookup = {}
        for i, p in enumerate(pieces):
            self.lookup.setdefault(p, i)
        self.add_space_prefix = add_space_prefix
        self.byte_id = {}
        for b in range(256):
            i = self.lookup.get(f"<0x{b:02X}>")
            if i is not None:
                self.byte_id[b] = i

    def encode(self, text):
        if not text:
            return []
        if self.add_space_prefix:
            text = " " + text
        text = text.replace(" ", "\u2581")
        sym = list(text)
        n = len(sym)
        nxt, prv, alive = list(range(1, n + 1)), list(range(-1, n - 1)), [True] * n
        heap, rev = [], {}
        look, scores = self.lookup, self.scores

        def bigram(a):
            b = nxt[a]
            if b >= n:
                return
            s = sym[a] + sym[b]
            t = look.get(s)
            if t is not None:
                heapq.heappush(heap, (-scores[t], a, sym[a], sym[b]))
                rev.setdefault(s, (sym[a], sym[b]))
        for a in range(n - 1):
            bigram(a)
        while heap:
            _, a, left, right = heapq.heappop(heap)
            b = nxt[a] if a < n else n
            if not alive[a] or b >= n or sym[a] != left or sym[b] != right:
                continue
            sym[a] = left + right
            alive[b] = False
            nxt[a] = nxt[b]
            if nxt[a] < n:
                prv[nxt[a]] = a
            if prv[a] >= 0:
                bigram(prv[a])
            bigram(a)
        out = []

        def resegment(s):
            t = look.get(s)
            if t is not None:
                out.append(t)
                return
            if s in rev:
                resegment(rev[s][0])
                resegment(rev[s][1])
                return
            for by in s.encode("utf-8"):
                if by not in self.byte_id:
                    raise OracleError(f"byte 0x{by:02X} has no <0x..> piece in the vocabulary")
                out.append(self.byte_id[by])
        for i in range(n):
            if alive[i]:
                resegment(sym[i])
        return out


def bytes_to_unicode():
    """GPT-2's byte -> printable code point map used by ByteLevel BPE."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    k = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + k)
            k += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


# the split regexes llama.cpp uses per tokenizer.ggml.pre (llama-vocab.cpp llm_tokenizer_bpe)
GGUF_PRE_REGEX = {
    "gpt-2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    "qwen2": r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "llama3": r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
              r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
GGUF_PRE_REGEX["dbrx"] = GGUF_PRE_REGEX["smaug-bpe"] = GGUF_PRE_REGEX["llama3"]


class ByteBpe:
    """Byte-level BPE: optional NFC, split by a regex (matches and the gaps between them are pieces, HF Split
    'Isolated'), each piece's UTF-8 bytes mapped by bytes_to_unicode, then merges by rank (lowest rank first,
    leftmost on ties; HF tokenizers BPE / llama.cpp llm_tokenizer_bpe_session)."""

    def __init__(self, vocab, merges, pattern, nfc):
        import regex  # Debian python3-regex: \p{L} classes and scoped (?i:...) flags
        self.vocab, self.nfc = vocab, nfc
        self.rank = {tuple(m): i for i, m in enumerate(merges)}
        self.re = regex.compile(pattern)
        self.b2u = bytes_to_unicode()
        self.cache = {}

    def _bpe(self, word):
        sym = list(word)
        rank = self.rank
        while len(sym) > 1:
            best, at = None, -1
            for i in range(len(sym) - 1):
                r = rank.get((sym[i], sym[i + 1]))
                if r is not None and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            sym[at:at + 2] = [sym[at] + sym[at + 1]]
        try:
            return [self.vocab[s] for s in sym]
        except KeyError as e:
            raise OracleError(f"byte-level BPE: symbol {e} not in the vocabulary")

    def split(self, text):
        pieces, last = [], 0
        for m in self.re.finditer(text):
            if m.start() > last:
                pieces.append(text[last:m.start()])
            if m.end() > m.start():
                pieces.append(m.group())
            last = m.end()
        if last < len(text):
            pieces.append(text[last:])
        return pieces

    def encode(self, text):
        if self.nfc:
            text = unicodedata.normalize("NFC", text)
        out = []
        for p in self.split(text):
            ids = self.cache.get(p)
            if ids is None:
                ids = self.cache[p] = self._bpe("".join(self.b2u[b] for b in p.encode("utf-8")))
            out.extend(ids)
        return out


class SentencePieceLib:
    """tokenizer.model through the sentencepiece library (the model's own normalizer and dummy prefix)."""

    def __init__(self, path):
        import sentencepiece
        self.sp = sentencepiece.SentencePieceProcessor(model_file=path)

    def encode(self, text):
        return self.sp.encode(text) if text else []


def read_llama2c_tokenizer(path, vocab_size):
    """llama2.c tokenizer.bin: pieces (space = ' ') and scores -> SpmBpe (llama2.c run.c encode)."""
    raw = open(path, "rb").read()
    off, pieces, scores = 4, [], []
    for _ in range(vocab_size):
        score, n = struct.unpack_from("<fi", raw, off)
        pieces.append(raw[off + 8:off + 8 + n].decode("utf-8", errors="surrogateescape").replace(" ", "\u2581"))
        scores.append(score)
        off += 8 + n
    return SpmBpe(pieces, scores, add_space_prefix=True)


class Tokenizer:
    """A vocabulary's encode() plus its BOS rule (bos_id is None when no BOS is added)."""

    def __init__(self, impl, bos_id, describe):
        self.impl, self.bos_id, self.describe = impl, bos_id, describe

    def encode(self, text, bos):
        ids = self.impl.encode(text)
        return ([self.bos_id] + ids) if (bos and self.bos_id is not None) else ids


def gguf_tokenizer(g, pre_override=None):
    """llama.cpp llama_vocab::impl::load semantics for the `llama` (SPM) and `gpt2` (BPE) vocabularies."""
    model = g.kv.get("tokenizer.ggml.model")
    toks = g.kv["tokenizer.ggml.tokens"]
    if model == "llama":
        scores = g.kv.get("tokenizer.ggml.scores", [0.0] * len(toks))
        impl = SpmBpe(toks, scores, bool(g.kv.get("tokenizer.ggml.add_space_prefix", True)))
        add_bos = bool(g.kv.get("tokenizer.ggml.add_bos_token", True))
        bos = g.kv.get("tokenizer.ggml.bos_token_id", 1)
        desc = f"GGUF llama (SentencePiece BPE), add_space_prefix {impl.add_space_prefix}"
    elif model == "gpt2":
        pre = pre_override or g.kv.get("tokenizer.ggml.pre", "default")
        if pre not in GGUF_PRE_REGEX:
            raise OracleError(f"{g.path}: tokenizer.ggml.pre '{pre}' not supported here")
        merges = [m.split(" ", 1) for m in g.kv["tokenizer.ggml.merges"]]
        impl = ByteBpe({t: i for i, t in enumerate(toks)}, merges, GGUF_PRE_REGEX[pre], nfc=False)
        add_bos = bool(g.kv.get("tokenizer.ggml.add_bos_token", False))
        bos = g.kv.get("tokenizer.ggml.bos_token_id", 11)
        desc = f"GGUF gpt2 (byte-level BPE), pre {pre}"
    else:
        raise OracleError(f"{g.path}: tokenizer.ggml.model '{model}' not supported here")
    return Tokenizer(impl, bos if add_bos else None, desc + f", add_bos {add_bos}")


def hf_tokenizer(folder, tok_cfg_overrides=None):
    """An HF folder's tokenizer as tokenizer(text) runs it: tokenizer.json (byte-level BPE) if present, else
    tokenizer.model; the BOS rule of tokenizer_config.json (add_bos_token, bos_token; class defaults)."""
    cfg_path = os.path.join(folder, "tokenizer_config.json")
    tc = json.load(open(cfg_path)) if os.path.exists(cfg_path) else {}
    tc.update(tok_cfg_overrides or {})
    tj = os.path.join(folder, "tokenizer.json")
    if os.path.exists(tj):
        t = json.load(open(tj))
        if t["model"]["type"] != "BPE":
            raise OracleError(f"{tj}: model type {t['model']['type']} not supported here")
        nfc = (t.get("normalizer") or {}).get("type") == "NFC"
        pre = t.get("pre_tokenizer") or {}
        seq = pre.get("pretokenizers", [pre])
        split = [p for p in seq if p.get("type") == "Split"]
        if not split or any(p.get("type") not in ("Split", "ByteLevel") for p in seq):
            raise OracleError(f"{tj}: pre_tokenizer {pre} not supported here")
        merges = [m.split(" ", 1) if isinstance(m, str) else m for m in t["model"]["merges"]]
        vocab = dict(t["model"]["vocab"])
        for a in t.get("added_tokens", []):
            vocab.setdefault(a["content"], a["id"])
        impl = ByteBpe(vocab, merges, split[0]["pattern"]["Regex"], nfc)
        desc = "tokenizer.json byte-level BPE" + (" (NFC)" if nfc else "")
        default_add_bos = False
    else:
        impl = SentencePieceLib(os.path.join(folder, "tokenizer.model"))
        vocab = {impl.sp.id_to_piece(i): i for i in range(impl.sp.get_piece_size())}
        desc = "tokenizer.model (sentencepiece library)"
        default_add_bos = tc.get("tokenizer_class", "LlamaTokenizer") in ("LlamaTokenizer", "LlamaTokenizerFast",
                                                                        "GemmaTokenizer", "GemmaTokenizerFast")
    if "bos_token" in tc:
        bos_tok = tc["bos_token"]
    else:                            # the tokenizer class's default: the SentencePiece model's own BOS piece
        bos_tok = impl.sp.id_to_piece(impl.sp.bos_id()) if isinstance(impl, SentencePieceLib) and \
            impl.sp.bos_id() >= 0 else None
    if isinstance(bos_tok, dict):
        bos_tok = bos_tok.get("content")
    add_bos = tc.get("add_bos_token", default_add_bos)
    if add_bos and bos_tok is None:
        raise OracleError(f"{cfg_path}: add_bos_token true but bos_token is null: no BOS to add")
    bos = None
    if add_bos:
        if bos_tok not in vocab:
            raise OracleError(f"{cfg_path}: bos_token '{bos_tok}' is not in the vocabulary")
        bos = vocab[bos_tok]
    return Tokenizer(impl, bos, desc + f", add_bos {bool(add_bos)}")


# ============================================================================================== RoPE
class Rope:
    """One layer's rotary embedding: rotary_dim d (the first d dims of each head rotate), the pair layout (neox:
    pairs (i, i + d/2), transformers rotate_half / ggml NEOX; otherwise interleaved pairs (2i, 2i+1), ggml NORM), and
    params(L) -> (inv_freq[d/2] float64, mscale): position p rotates pair i by p * inv_freq_i and cos / sin are
    multiplied by mscale.  L (the forward's sequence length) matters only to LongRoPE's long / short choice."""

    def __init__(self, rotary_dim, neox, theta, kind="default", **p):
        if rotary_dim <= 0 or rotary_dim % 2:
            raise OracleError(f"rotary_dim {rotary_dim} must be positive and even")
        if not (theta > 0 and math.isfinite(theta)):
            raise OracleError(f"rope_theta {theta} must be finite and > 0")
        self.d, self.neox, self.theta, self.kind, self.p = rotary_dim, neox, float(theta), kind, p

    def base_inv(self):
        return self.theta ** (-np.arange(0, self.d, 2, dtype=np.float64) / self.d)

    def describe(self):
        q = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.p.items()}
        return dict(kind=self.kind, theta=self.theta, rotary_dim=self.d, layout="neox" if self.neox else "interleaved",
                    **q)

    def params(self, L):
        inv, p, d = self.base_inv(), self.p, self.d
        if self.kind == "default":
            return inv, 1.0
        if self.kind == "linear":          # transformers _compute_linear_scaling_rope_parameters; posenc `linear`
            return inv / p["factor"], 1.0
        if self.kind == "yarn":            # transformers _compute_yarn_parameters (truncate), posenc `yarn`
            f, orig = p["factor"], p["original_max_position_embeddings"]

            def corr(r):
                return d * math.log(orig / (r * 2 * math.pi)) / (2 * math.log(self.theta))
            lo, hi = corr(p.get("beta_fast", 32.0)), corr(p.get("beta_slow", 1.0))
            if p.get("truncate", True):
                lo, hi = math.floor(lo), math.ceil(hi)
            lo, hi = max(lo, 0), min(hi, d - 1)
            if lo == hi:
                hi += 0.001
            ramp = np.clip((np.arange(d // 2, dtype=np.float64) - lo) / (hi - lo), 0.0, 1.0)
            return (inv / f) * ramp + inv * (1.0 - ramp), p["attention_factor"]
        if self.kind == "longrope":        # transformers _compute_longrope_parameters + longrope_frequency_update
            long = L > p["original_max_position_embeddings"] if p["choose"] == "seq_len" else \
                pad_to(L, 256) > p["original_max_position_embeddings"]   # llama.cpp get_rope_factors, n_ctx padded
            ext = np.asarray(p["long_factor"] if long else p["short_factor"], dtype=np.float64)
            return inv / ext, p["attention_factor"]
        if self.kind == "llama3":          # transformers _compute_llama3_parameters
            f, lo_f, hi_f, old = p["factor"], p["low_freq_factor"], p["high_freq_factor"], \
                p["original_max_position_embeddings"]
            wl = 2 * math.pi / inv
            out = np.where(wl > old / lo_f, inv / f, inv)
            smooth = (old / wl - lo_f) / (hi_f - lo_f)
            mid = (wl >= old / hi_f) & (wl <= old / lo_f)
            return np.where(mid, (1 - smooth) * out / f + smooth * out, out), 1.0
        if self.kind == "ggml":            # ggml rope_f32 + rope_yarn + ggml_rope_yarn_corr_dims
            ff = p.get("freq_factors")
            if p.get("long_factors") is not None:   # llama_model::get_rope_factors (LongRoPE on llama.cpp)
                ff = p["long_factors"] if pad_to(L, 256) > p["n_ctx_orig"] else p["short_factors"]
            if ff is not None:
                inv = inv / np.asarray(ff, dtype=np.float64)
            fs, ext, mscale = p["freq_scale"], p["ext_factor"], p["attn_factor"]
            if ext == 0.0:
                return inv * fs, mscale

            def corr(r):
                return d * math.log(p["n_ctx_orig"] / (r * 2 * math.pi)) / (2 * math.log(self.theta))
            lo = max(0.0, math.floor(corr(p["beta_fast"])))
            hi = min(d - 1.0, math.ceil(corr(p["beta_slow"])))
            y = (np.arange(d // 2, dtype=np.float64) - lo) / max(0.001, hi - lo)
            mix = (1.0 - np.clip(y, 0.0, 1.0)) * ext
            return inv * (fs * (1.0 - mix) + mix), mscale * (1.0 + 0.1 * math.log(1.0 / fs))
        raise OracleError(f"rope kind {self.kind} not implemented")

    def cos_sin(self, positions, L):
        inv, m = self.params(L)
        ang = np.asarray(positions, dtype=np.float64)[:, None] * inv[None, :]
        return (m * np.cos(ang)).astype(np.float32), (m * np.sin(ang)).astype(np.float32)


def apply_rope(x, cos, sin, rope):
    """x (..., T, heads, head_dim); cos / sin (T, d/2).  The first rope.d dims rotate, the rest pass through."""
    d = rope.d
    c, s = cos[:, None, :], sin[:, None, :]
    out = x.copy()
    if rope.neox:
        a, b = x[..., :d // 2], x[..., d // 2:d]
        out[..., :d // 2] = a * c - b * s
        out[..., d // 2:d] = b * c + a * s
    else:
        a, b = x[..., 0:d:2], x[..., 1:d:2]
        out[..., 0:d:2] = a * c - b * s
        out[..., 1:d:2] = a * s + b * c
    return out


def hf_yarn_attention_factor(rp, factor):
    def get_mscale(scale, mscale=1.0):
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0
    if rp.get("attention_factor") is not None:
        return float(rp["attention_factor"])
    if rp.get("mscale") and rp.get("mscale_all_dims"):
        return get_mscale(factor, rp["mscale"]) / get_mscale(factor, rp["mscale_all_dims"])
    return get_mscale(factor)


def hf_rope(rp, cfg, head_dim):
    """transformers ROPE_INIT_FUNCTIONS for one layer type's parameters rp (v5 rope_parameters form)."""
    t = rp.get("rope_type", rp.get("type", "default"))
    prf = rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    rd = int(head_dim * prf)
    theta = rp["rope_theta"]
    maxpos = cfg.get("max_position_embeddings")
    if t == "default":
        return Rope(rd, True, theta)
    if t == "linear":
        return Rope(rd, True, theta, "linear", factor=float(rp["factor"]))
    if t == "yarn":
        f = float(rp["factor"])
        orig = rp.get("original_max_position_embeddings") or maxpos
        return Rope(rd, True, theta, "yarn", factor=f, original_max_position_embeddings=orig,
                    beta_fast=float(rp.get("beta_fast") or 32), beta_slow=float(rp.get("beta_slow") or 1),
                    truncate=rp.get("truncate", True), attention_factor=hf_yarn_attention_factor(rp, f))
    if t in ("longrope", "su"):
        orig = rp.get("original_max_position_embeddings", cfg.get("original_max_position_embeddings"))
        if orig is not None:
            factor = maxpos / orig
        else:
            orig, factor = maxpos, float(rp.get("factor", 1.0))
        af = rp.get("attention_factor")
        if af is None:
            af = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
        for k in ("short_factor", "long_factor"):
            if len(rp[k]) != rd // 2:
                raise OracleError(f"rope {k} has {len(rp[k])} values, rotary_dim/2 = {rd // 2}")
        return Rope(rd, True, theta, "longrope", short_factor=list(rp["short_factor"]),
                    long_factor=list(rp["long_factor"]), original_max_position_embeddings=orig,
                    attention_factor=float(af), choose="seq_len")
    if t == "llama3":
        return Rope(rd, True, theta, "llama3", factor=float(rp["factor"]),
                    low_freq_factor=float(rp["low_freq_factor"]), high_freq_factor=float(rp["high_freq_factor"]),
                    original_max_position_embeddings=rp["original_max_position_embeddings"])
    raise OracleError(f"rope_type '{t}' is not implemented by this oracle")


def method_rope(rope, method, s, L0):
    """posenc's methods (protocol 3) replacing a layer's RoPE; theta and layout kept."""
    if method == "none":
        return Rope(rope.d, rope.neox, rope.theta)
    if method == "linear":
        return Rope(rope.d, rope.neox, rope.theta, "linear", factor=s) if s > 1 else Rope(rope.d, rope.neox, rope.theta)
    if method == "ntk":
        return Rope(rope.d, rope.neox, rope.theta * s ** (rope.d / (rope.d - 2)))
    if method == "yarn":
        if s <= 1:
            return Rope(rope.d, rope.neox, rope.theta)
        return Rope(rope.d, rope.neox, rope.theta, "yarn", factor=s, original_max_position_embeddings=L0,
                    beta_fast=32.0, beta_slow=1.0, truncate=True, attention_factor=0.1 * math.log(s) + 1.0)
    raise OracleError(f"method '{method}' unknown (native, none, linear, ntk, yarn)")


# ============================================================================================== the model
class W:
    """A weight matrix (out, in) as float32 with its storage type (for the llama.cpp numerics emulation)."""

    def __init__(self, a, kind="F32"):
        self.a, self.kind = np.ascontiguousarray(a, dtype=np.float32), kind


class Layer:
    def __init__(self, rope, window, pmap=None):
        self.rope, self.window = rope, window     # rope None = NoPE; window None = full causal attention
        self.pmap = pmap                          # a training-free position map (position_map_plan), or None


class Model:
    """Everything a forward needs: shape, per-family block, per-layer RoPE / window, weights, tokenizer."""

    def __init__(self, **kw):
        self.__dict__.update(dict(emb_scale=None, attn_softcap=None, final_softcap=None, qk_norm=None,
                                  parallel_residual=False, pos_emb=None, n_positions=None, ggml=False,
                                  numerics="exact", notes=[]))
        self.__dict__.update(kw)

    def describe(self):
        return dict(name=self.name, source=self.source, family=self.family, block=self.block.__name__,
                    n_layer=self.n_layer, hidden=self.d, heads=self.nh, kv_heads=self.nkv, head_dim=self.hd,
                    vocab=self.vocab, norm=self.norm_kind, eps=self.eps, act=self.act, attn_scale=self.attn_scale,
                    emb_scale=self.emb_scale, attn_softcap=self.attn_softcap, final_softcap=self.final_softcap,
                    qk_norm=self.qk_norm, L0=self.L0, tokenizer=self.tokenizer.describe,
                    layers=[dict(rope=(l.rope.describe() if l.rope else None), window=l.window) for l in self.layers],
                    notes=self.notes)


def linear(m, x, w, b=None):
    """x (..., in) @ w.T (+ b).  With llama.cpp numerics, x is first rounded to the activation type ggml converts
    it to for that weight type (vec_dot_type: BF16 for BF16, Q8_0 for Q8_0, F16 for F16)."""
    if m.numerics in ("ggml", "ggml64"):
        if w.kind == "BF16":
            x = round_to_bf16(x)
        elif w.kind == "Q8_0":
            x = round_to_q8_0(x)
        elif w.kind == "F16":
            x = x.astype(np.float16).astype(np.float32)
    if m.numerics == "ggml64":      # the same roundings with float64 sums: how far summation order alone moves it
        y = (x.astype(np.float64) @ w.a.T.astype(np.float64)).astype(np.float32)
    else:
        y = x @ w.a.T
    if b is not None:
        y = y + b
    return y


def norm(m, x, w, b=None):
    """RMSNorm (x / sqrt(mean x^2 + eps) * w) or LayerNorm ((x - mean) / sqrt(var + eps) * w + b); statistics in
    float64 (ggml accumulates in double; torch in float32: the difference is far below the references' digits)."""
    x64 = x.astype(np.float64)
    if m.norm_kind == "rms":
        y = x64 / np.sqrt((x64 * x64).mean(axis=-1, keepdims=True) + m.eps)
    else:
        mu = x64.mean(axis=-1, keepdims=True)
        y = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(axis=-1, keepdims=True) + m.eps)
    y = y.astype(np.float32) * w
    return y + b if b is not None else y


_ERF = np.frompyfunc(math.erf, 1, 1)


def gelu_tanh(x):
    x = x.astype(np.float32)
    return np.float32(0.5) * x * (np.float32(1) + np.tanh(np.float32(math.sqrt(2 / math.pi)) *
                                                         (x + np.float32(0.044715) * x * x * x)))


def gelu_ggml_table(x):
    """ggml_vec_gelu_f32 with GGML_GELU_FP16: y = fp16(gelu(fp16(x))) for -10 < x < 10, 0 below, x above."""
    x = x.astype(np.float32)
    t = gelu_tanh(x.astype(np.float16).astype(np.float32)).astype(np.float16).astype(np.float32)
    return np.where(x <= -10, np.float32(0), np.where(x >= 10, x, t)).astype(np.float32)


def activation(m, x):
    if m.act == "silu":
        return x / (np.float32(1) + np.exp(-x))
    if m.act == "gelu_tanh":
        return gelu_ggml_table(x) if m.numerics in ("ggml", "ggml64") else gelu_tanh(x)
    if m.act == "gelu_erf":
        return (0.5 * x.astype(np.float64) * (1.0 + _ERF(x.astype(np.float64) / math.sqrt(2.0)).astype(np.float64))
                ).astype(np.float32)
    raise OracleError(f"activation {m.act}")


def attention(m, q, k, v, layer, cos_sin):
    """q (B, T, nh, hd), k / v (B, T, nkv, hd); RoPE (or none), scores q.k * attn_scale, soft-capping, causal mask
    restricted to the window (key j visible from query i iff 0 <= i - j < W), softmax, GQA (query head h reads kv
    head h // (nh / nkv)).  Returns (B, T, nh * hd)."""
    B, T, nh, hd = q.shape
    nkv = k.shape[2]
    rep = nh // nkv
    if layer.pmap is not None:
        return mapped_attention(m, q, k, v, layer)
    if layer.rope is not None:
        cos, sin = cos_sin
        q, k = apply_rope(q, cos, sin, layer.rope), apply_rope(k, cos, sin, layer.rope)
    qg = q.reshape(B, T, nkv, rep, hd).transpose(0, 2, 3, 1, 4)          # (B, nkv, rep, T, hd)
    kt = k.transpose(0, 2, 3, 1)[:, :, None]                             # (B, nkv, 1, hd, T)
    vt = v.transpose(0, 2, 1, 3)[:, :, None]                             # (B, nkv, 1, T, hd)
    s = (qg @ kt) * np.float32(m.attn_scale)
    if m.attn_softcap:
        c = np.float32(m.attn_softcap)
        s = c * np.tanh(s / c)
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    mask = j > i
    if layer.window is not None and layer.window < T:
        mask |= (i - j) >= layer.window
    s[..., mask] = -np.inf
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    o = s @ vt                                                           # (B, nkv, rep, T, hd)
    return o.transpose(0, 3, 1, 2, 4).reshape(B, T, nh * hd)


def position_map_plan(pm, T):
    """The training-free position maps, written from their papers (positions 0..T-1 of one window):
    returns (sets, sel): sets = [(q_pos[T], k_pos[T]) float64], the positions q and k are rotated at in each score
    set, and sel (T, T) int: which set scores query i against key j, -1 = not attended.  Set 0 keeps the
    distance i - j (plain RoPE; dca rotates both at their offsets in the chunk).
      self-extend  (LongLM, Jin et al. 2024, sec. 3): relative distance d = i - j < window: plain positions; else
                   grouped positions q = i // group + window - window // group, k = j // group.
      dca          (ChunkLlama, An et al. 2024, sec. 3; the chunks of its code and of Qwen2.5-1M's
                   dual_chunk_attention_config): chunks of c = chunk_size - local_size; every key at j mod c; a key
                   in the query's chunk: the query at i mod c (intra); in the chunk before: at
                   min(i mod c + c, chunk_size) (successive); in earlier chunks: at min(2c - 1, chunk_size) (inter).
      rerope       (Su 2023, "ReRoPE"): d < window: plain; else relative distance exactly window (q at window,
                   k at 0).
      leaky-rerope d < window: plain; else q at window + (i - window) / leak, k at j / leak, i.e. distance
                   window + (d - window) / leak.
      sinks        (StreamingLLM, Xiao et al. 2024, sec. 3.2, its evaluation): keys 0..sinks-1 and the window
                   most recent keys (the query's own included); positions are cache indices: the recent keys keep
                   their distance, a sink key m is seen from the query's cache index min(i, sinks + window - 1).
      lm-infinite  (Han et al. 2024, sec. 4): the Lambda mask, keys 0..global-1 and i-window+1..i; local keys at
                   their distance, a global key farther than window at distance exactly window."""
    pos = np.arange(T, dtype=np.float64)
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    d = i - j
    kind = pm["kind"]
    plain = (pos, pos)
    if kind == "self-extend":
        G, W = pm["group"], pm["window"]
        sets = [plain, (np.floor(pos / G) + W - W // G, np.floor(pos / G))]
        sel = np.where(d < W, 0, 1)
    elif kind == "dca":
        c = pm["chunk_size"] - pm["local_size"]
        off = np.mod(pos, c)
        sets = [(off, off), (np.minimum(off + c, pm["chunk_size"]), off),
                (np.full(T, float(min(2 * c - 1, pm["chunk_size"]))), off)]
        ci, cj = i // c, j // c
        sel = np.where(ci == cj, 0, np.where(cj == ci - 1, 1, 2))
    elif kind == "rerope":
        w = pm["window"]
        sets = [plain, (np.full(T, float(w)), np.zeros(T))]
        sel = np.where(d < w, 0, 1)
    elif kind == "leaky-rerope":
        w, k = pm["window"], pm["leak"]
        sets = [plain, (w + (pos - w) / k, pos / k)]
        sel = np.where(d < w, 0, 1)
    elif kind == "sinks":
        s, W = pm["sinks"], pm["window"]
        sets = [plain, (np.minimum(pos, s + W - 1), pos)]
        sel = np.where(d < W, 0, np.where(j < s, 1, -1))
    elif kind == "lm-infinite":
        n, W = pm["global"], pm["window"]
        sets = [plain, (np.full(T, float(W)), np.zeros(T))]
        sel = np.where(d < W, 0, np.where(j < n, 1, -1))
    else:
        raise OracleError(f"position map {kind} not implemented")
    sel = np.where(d < 0, -1, sel)
    return sets, sel


def mapped_attention(m, q, k, v, layer):
    """attention() under a position map: each score set rotates q and k at its own positions (the layer's RoPE,
    float64 angles), the selection picks each pair's score (or masks it), then soft-capping, the window, the
    softmax and GQA as attention()."""
    B, T, nh, hd = q.shape
    nkv = k.shape[2]
    rep = nh // nkv
    sets, sel = position_map_plan(layer.pmap, T)
    vt = v.transpose(0, 2, 1, 3)[:, :, None]
    s = None
    for si, (qp, kp) in enumerate(sets):
        cq, sq = layer.rope.cos_sin(qp, T)
        ck, sk = layer.rope.cos_sin(kp, T)
        qr, kr = apply_rope(q, cq, sq, layer.rope), apply_rope(k, ck, sk, layer.rope)
        qg = qr.reshape(B, T, nkv, rep, hd).transpose(0, 2, 3, 1, 4)
        kt = kr.transpose(0, 2, 3, 1)[:, :, None]
        ss = (qg @ kt) * np.float32(m.attn_scale)
        s = ss if s is None else np.where(sel == si, ss, s)
    if m.attn_softcap:
        c = np.float32(m.attn_softcap)
        s = c * np.tanh(s / c)
    mask = sel < 0
    if layer.window is not None and layer.window < T:
        mask |= (np.arange(T)[:, None] - np.arange(T)[None, :]) >= layer.window
    s[..., mask] = -np.inf
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    o = s @ vt
    return o.transpose(0, 3, 1, 2, 4).reshape(B, T, nh * hd)


def self_attention(m, p, h, layer, cos_sin):
    """Projections, q/k norms, attention, output projection (shared by every family's block)."""
    B, T, _ = h.shape
    q = linear(m, h, p["wq"], p.get("bq"))
    k = linear(m, h, p["wk"], p.get("bk"))
    v = linear(m, h, p["wv"], p.get("bv"))
    if m.qk_norm == "full":          # OLMo 2: RMSNorm over the whole q / k projection, before the head split
        q, k = norm(m, q, p["q_norm"]), norm(m, k, p["k_norm"])
    q = q.reshape(B, T, m.nh, m.hd)
    k = k.reshape(B, T, m.nkv, m.hd)
    v = v.reshape(B, T, m.nkv, m.hd)
    if m.qk_norm == "head":          # Qwen3 / Gemma 3: RMSNorm per head (head_dim), before RoPE
        q, k = norm(m, q, p["q_norm"]), norm(m, k, p["k_norm"])
    o = attention(m, q, k, v, layer, cos_sin)
    return linear(m, o, p["wo"], p.get("bo"))


def gated_mlp(m, p, h):
    return linear(m, activation(m, linear(m, h, p["w_gate"])) * linear(m, h, p["w_up"]), p["w_down"])


def plain_mlp(m, p, h):
    return linear(m, activation(m, linear(m, h, p["w_up"], p.get("b_up"))), p["w_down"], p.get("b_down"))


# ---------------------------------------------------------------------------------------------- family blocks
def LlamaDecoderLayer(m, p, x, layer, cs):
    """transformers LlamaDecoderLayer (also Mistral, Qwen2, Qwen3, SmolLM3, Phi3 after its fused-weight split);
    llama.cpp llm_build_llama / qwen2 / qwen3 / smollm3 / phi3: x + attn(norm(x)), then + mlp(norm(x))."""
    x = x + self_attention(m, p, norm(m, x, p["attn_norm"]), layer, cs)
    return x + gated_mlp(m, p, norm(m, x, p["ffn_norm"]))


def Gemma2DecoderLayer(m, p, x, layer, cs):
    """transformers Gemma2DecoderLayer / Gemma3DecoderLayer; llama.cpp llm_build_gemma2_iswa / gemma3: sandwich
    norms around attention and MLP (input, post_attention, pre_feedforward, post_feedforward)."""
    x = x + norm(m, self_attention(m, p, norm(m, x, p["attn_norm"]), layer, cs), p["post_attn_norm"])
    return x + norm(m, gated_mlp(m, p, norm(m, x, p["ffn_norm"])), p["post_ffn_norm"])


def Olmo2DecoderLayer(m, p, x, layer, cs):
    """transformers Olmo2DecoderLayer; llama.cpp llm_build_olmo2: norms after attention and MLP, none before."""
    x = x + norm(m, self_attention(m, p, x, layer, cs), p["post_attn_norm"])
    return x + norm(m, gated_mlp(m, p, x), p["post_ffn_norm"])


def GPTNeoXLayer(m, p, x, layer, cs):
    """transformers GPTNeoXLayer; llama.cpp llm_build_gptneox: LayerNorm, parallel residual
    x + attn(ln1(x)) + mlp(ln2(x)) (or sequential when use_parallel_residual is false)."""
    a = self_attention(m, p, norm(m, x, p["attn_norm"], p["attn_norm_b"]), layer, cs)
    if m.parallel_residual:
        return x + a + plain_mlp(m, p, norm(m, x, p["ffn_norm"], p["ffn_norm_b"]))
    x = x + a
    return x + plain_mlp(m, p, norm(m, x, p["ffn_norm"], p["ffn_norm_b"]))


def GPT2Block(m, p, x, layer, cs):
    """transformers GPT2Block; llama.cpp llm_build_gpt2: x + attn(ln_1(x)), then + mlp(ln_2(x))."""
    x = x + self_attention(m, p, norm(m, x, p["attn_norm"], p["attn_norm_b"]), layer, cs)
    return x + plain_mlp(m, p, norm(m, x, p["ffn_norm"], p["ffn_norm_b"]))


def forward(m, tokens, ropes=None, pos_rows=None, pmaps=None):
    """tokens (B, T) int -> logits (B, T, vocab) float32 for positions 0..T-1 of every row.  ropes: per-layer Rope
    (None = NoPE) replacing the model's own (a method); pos_rows: (T, hidden) learned position rows (GPT-2); pmaps:
    per-layer position maps (position_map_plan; None = plain attention)."""
    tokens = np.asarray(tokens)
    B, T = tokens.shape
    ropes = ropes if ropes is not None else [l.rope for l in m.layers]
    x = m.tok_emb[tokens]
    if m.emb_scale is not None:
        x = x * np.float32(m.emb_scale)
    if m.pos_emb is not None:
        if pos_rows is None:
            if T > m.n_positions:
                raise OracleError(f"{m.name}: position {m.n_positions} is past the learned table (n_positions "
                                  f"{m.n_positions}); use method linear")
            pos_rows = m.pos_emb[:T]
        x = x + pos_rows[None]
    tables = {}
    pos = np.arange(T)
    for li, (layer, rope) in enumerate(zip(m.layers, ropes)):
        lay = Layer(rope, layer.window, pmaps[li] if pmaps is not None else None)
        cs = None
        if rope is not None:
            key = id(rope)
            if key not in tables:
                tables[key] = rope.cos_sin(pos, T)
            cs = tables[key]
        x = m.block(m, m.w[li], x, lay, cs)
    x = norm(m, x, m.out_norm, m.out_norm_b)
    logits = linear(m, x, m.lm_head)
    if m.final_softcap:
        c = np.float32(m.final_softcap)
        logits = c * np.tanh(logits / c)
    return logits


# ============================================================================================== Hugging Face folders
HF_FAMILY = {"llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "qwen3": "qwen3", "gemma2": "gemma2",
             "gemma3_text": "gemma3", "phi3": "phi3", "smollm3": "smollm3", "olmo2": "olmo2", "gpt_neox": "gptneox",
             "gpt2": "gpt2"}
HF_TIE_DEFAULT = {"llama": False, "mistral": False, "qwen2": False, "qwen3": False, "gemma2": True, "gemma3": True,
                  "phi3": False, "smollm3": True, "olmo2": False, "gptneox": False, "gpt2": True}
DELETE = object()


def hf_layer_types(cfg, fam):
    """Per layer 'full_attention' / 'sliding_attention' as each family's config class derives them."""
    n = cfg["num_hidden_layers"]
    if cfg.get("layer_types") is not None:
        lt = list(cfg["layer_types"])
        if len(lt) != n or any(t not in ("full_attention", "sliding_attention") for t in lt):
            raise OracleError(f"layer_types {lt}: need {n} entries of full_attention / sliding_attention")
        return lt
    sw = cfg.get("sliding_window")
    if fam == "gemma2":          # Gemma2Config: sliding on even layers
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    if fam == "gemma3":          # Gemma3TextConfig: every sliding_window_pattern-th layer global
        pat = cfg.get("sliding_window_pattern", 6)
        return ["sliding_attention" if (i + 1) % pat else "full_attention" for i in range(n)]
    if fam in ("qwen2", "qwen3"):  # Qwen2Config / Qwen3Config: use_sliding_window and i >= max_window_layers
        on = cfg.get("use_sliding_window", False) and sw is not None
        mwl = cfg.get("max_window_layers", 28)
        return ["sliding_attention" if on and i >= mwl else "full_attention" for i in range(n)]
    if fam == "smollm3":         # SmolLM3Config: sliding only on NoPE layers, with use_sliding_window
        nr = smollm3_rope_flags(cfg)
        on = cfg.get("use_sliding_window", False) and sw is not None
        return ["sliding_attention" if on and not nr[i] else "full_attention" for i in range(n)]
    if fam in ("mistral", "phi3"):  # every layer gets config.sliding_window when it is set
        return ["sliding_attention" if sw is not None else "full_attention"] * n
    return ["full_attention"] * n


def smollm3_rope_flags(cfg):
    n = cfg["num_hidden_layers"]
    if cfg.get("no_rope_layers") is not None:
        f = list(cfg["no_rope_layers"])
        if len(f) < n:
            raise OracleError(f"no_rope_layers has {len(f)} entries, num_hidden_layers {n}")
        return [bool(x) for x in f[:n]]
    k = cfg.get("no_rope_layer_interval", 4)
    return [(i + 1) % k != 0 for i in range(n)]


def hf_rope_parameters(cfg, fam):
    """{layer type: v5-form rope parameters} from v5 rope_parameters (flat or nested per layer type) or v4
    rope_theta / rope_scaling (Gemma 3 v4: sliding layers at rope_local_base_freq, default RoPE)."""
    types = ("full_attention", "sliding_attention")
    rp = cfg.get("rope_parameters")
    if rp is not None:
        if set(rp) <= set(types) and all(isinstance(v, dict) for v in rp.values()):
            out = {t: dict(rp[t]) for t in rp}
        else:
            out = {t: dict(rp) for t in types}
        for t, p in out.items():
            if "rope_theta" not in p:
                raise OracleError(f"rope_parameters[{t}] has no rope_theta")
        return out
    theta = cfg.get("rotary_emb_base", 10000.0) if fam == "gptneox" else cfg.get("rope_theta", 10000.0)
    rs = dict(cfg.get("rope_scaling") or {})
    if "type" in rs and "rope_type" not in rs:
        rs["rope_type"] = rs.pop("type")
    full = dict(rope_type="default")
    full.update(rs)
    full["rope_theta"] = theta
    if fam == "gptneox" and "rotary_pct" in cfg:
        full["partial_rotary_factor"] = cfg["rotary_pct"]
    slide = dict(full)
    if fam == "gemma3":
        slide = dict(rope_type="default", rope_theta=cfg.get("rope_local_base_freq", 10000.0))
    return {"full_attention": full, "sliding_attention": slide}


def hf_L0(cfg, rps):
    for p in rps.values():
        if p.get("original_max_position_embeddings"):
            return int(p["original_max_position_embeddings"])
    if cfg.get("original_max_position_embeddings"):
        return int(cfg["original_max_position_embeddings"])
    return int(cfg.get("max_position_embeddings", cfg.get("n_positions", 0)))


def load_hf(folder, config_overrides=None, tokenizer_overrides=None, name=None, tokenizer=None):
    """An HF folder as transformers runs it (config.json semantics of its model_type).  tokenizer: a Tokenizer to use
    instead of the folder's own (a folder without one, e.g. stories260K's)."""
    cfg = json.load(open(os.path.join(folder, "config.json")))
    for k, v in (config_overrides or {}).items():
        if v is DELETE:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    mt = cfg.get("model_type")
    if mt not in HF_FAMILY:
        raise OracleError(f"{folder}/config.json: model_type '{mt}' not supported")
    fam = HF_FAMILY[mt]
    st = read_safetensors(os.path.join(folder, "model.safetensors"))
    used = set()

    def t(n, required=True):
        if n not in st:
            if required:
                raise OracleError(f"{folder}: tensor {n} missing")
            return None
        used.add(n)
        return st[n][0]
    tok = tokenizer or hf_tokenizer(folder, tokenizer_overrides)
    notes = []
    if fam == "gpt2":
        m = hf_gpt2(cfg, t)
    elif fam == "gptneox":
        m = hf_gptneox(cfg, t)
    else:
        m = hf_decoder(cfg, fam, t, notes)
    m.name, m.source, m.family, m.tokenizer, m.notes = name or os.path.basename(folder.rstrip("/")), "hf", fam, \
        tok, notes
    unused = sorted(set(st) - used)
    if unused:
        raise OracleError(f"{folder}: tensors not used: {unused[:5]}")
    return m


def hf_decoder(cfg, fam, t, notes):
    """Llama-style decoders: LlamaForCausalLM, Mistral, Qwen2, Qwen3, Gemma2, Gemma3 (text), Phi3, SmolLM3, OLMo2."""
    d, nh, nl = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or d // nh
    gemma = fam in ("gemma2", "gemma3")
    rps = hf_rope_parameters(cfg, fam)
    types = hf_layer_types(cfg, fam)
    rope_on = smollm3_rope_flags(cfg) if fam == "smollm3" else [True] * nl
    layers = []
    for i in range(nl):
        rope = hf_rope(rps[types[i]], cfg, hd) if rope_on[i] else None
        layers.append(Layer(rope, cfg.get("sliding_window") if types[i] == "sliding_attention" else None))
    plus1 = (lambda a: a + np.float32(1.0)) if gemma else (lambda a: a)   # Gemma RMSNorm: x * (1 + w)
    attn_bias = fam == "qwen2" or cfg.get("attention_bias", False)
    mlp_bias = cfg.get("mlp_bias", False)
    w = []
    for i in range(nl):
        pre = f"model.layers.{i}."
        p = {} if fam == "olmo2" else {"attn_norm": plus1(t(pre + "input_layernorm.weight"))}
        if fam == "phi3":
            qkv = t(pre + "self_attn.qkv_proj.weight")
            p["wq"], p["wk"], p["wv"] = (W(x) for x in np.split(qkv, [nh * hd, nh * hd + nkv * hd]))
            gu = t(pre + "mlp.gate_up_proj.weight")
            p["w_gate"], p["w_up"] = (W(x) for x in np.split(gu, 2))
        else:
            for k in "qkv":
                p["w" + k] = W(t(pre + f"self_attn.{k}_proj.weight"))
                if attn_bias:
                    p["b" + k] = t(pre + f"self_attn.{k}_proj.bias")
            p["w_gate"], p["w_up"] = W(t(pre + "mlp.gate_proj.weight")), W(t(pre + "mlp.up_proj.weight"))
        p["wo"] = W(t(pre + "self_attn.o_proj.weight"))
        if cfg.get("attention_bias", False) and fam != "qwen2":
            p["bo"] = t(pre + "self_attn.o_proj.bias")
        p["w_down"] = W(t(pre + "mlp.down_proj.weight"))
        if mlp_bias:
            raise OracleError("mlp_bias true is not implemented by this oracle")
        if gemma:
            p["post_attn_norm"] = plus1(t(pre + "post_attention_layernorm.weight"))
            p["ffn_norm"] = plus1(t(pre + "pre_feedforward_layernorm.weight"))
            p["post_ffn_norm"] = plus1(t(pre + "post_feedforward_layernorm.weight"))
        elif fam == "olmo2":
            p["post_attn_norm"] = t(pre + "post_attention_layernorm.weight")
            p["post_ffn_norm"] = t(pre + "post_feedforward_layernorm.weight")
        else:
            p["ffn_norm"] = t(pre + "post_attention_layernorm.weight")
        if fam in ("qwen3", "gemma3", "olmo2"):
            p["q_norm"] = plus1(t(pre + "self_attn.q_norm.weight"))
            p["k_norm"] = plus1(t(pre + "self_attn.k_norm.weight"))
        w.append(p)
    emb = t("model.embed_tokens.weight")
    tie = cfg.get("tie_word_embeddings", HF_TIE_DEFAULT[fam])
    head = emb if tie else t("lm_head.weight")
    if tie:
        t("lm_head.weight", False)     # a tied model's stored lm_head (if any) is the embedding's alias
    if gemma:
        scale = cfg.get("query_pre_attn_scalar", hd) ** -0.5
    else:
        scale = hd ** -0.5
    block = {"gemma2": Gemma2DecoderLayer, "gemma3": Gemma2DecoderLayer, "olmo2": Olmo2DecoderLayer}.get(
        fam, LlamaDecoderLayer)
    act = cfg.get("hidden_activation") or cfg.get("hidden_act", "silu")
    act = {"silu": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh", "gelu": "gelu_erf"}[act]
    return Model(block=block, n_layer=nl, d=d, nh=nh, nkv=nkv, hd=hd, vocab=emb.shape[0], norm_kind="rms",
                 eps=cfg.get("rms_norm_eps", 1e-6), act=act, attn_scale=scale,
                 emb_scale=float(np.float32(d ** 0.5)) if gemma else None,
                 attn_softcap=cfg.get("attn_logit_softcapping") if gemma else None,
                 final_softcap=cfg.get("final_logit_softcapping") if gemma else None,
                 qk_norm={"qwen3": "head", "gemma3": "head", "olmo2": "full"}.get(fam),
                 layers=layers, w=w, tok_emb=emb, out_norm=plus1(t("model.norm.weight")), out_norm_b=None,
                 lm_head=W(head), L0=hf_L0(cfg, rps))


def hf_gptneox(cfg, t):
    """GPTNeoXForCausalLM: fused query_key_value laid out per head as [q_h; k_h; v_h]."""
    d, nh, nl = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    hd = d // nh
    rps = hf_rope_parameters(cfg, "gptneox")
    layers = [Layer(hf_rope(rps["full_attention"], cfg, hd), None) for _ in range(nl)]
    w = []
    for i in range(nl):
        pre = f"gpt_neox.layers.{i}."
        qkv = t(pre + "attention.query_key_value.weight").reshape(nh, 3, hd, d)
        qkvb = t(pre + "attention.query_key_value.bias").reshape(nh, 3, hd)
        p = {"wq": W(qkv[:, 0].reshape(d, d)), "wk": W(qkv[:, 1].reshape(d, d)), "wv": W(qkv[:, 2].reshape(d, d)),
             "bq": qkvb[:, 0].reshape(d), "bk": qkvb[:, 1].reshape(d), "bv": qkvb[:, 2].reshape(d),
             "wo": W(t(pre + "attention.dense.weight")), "bo": t(pre + "attention.dense.bias"),
             "attn_norm": t(pre + "input_layernorm.weight"), "attn_norm_b": t(pre + "input_layernorm.bias"),
             "ffn_norm": t(pre + "post_attention_layernorm.weight"),
             "ffn_norm_b": t(pre + "post_attention_layernorm.bias"),
             "w_up": W(t(pre + "mlp.dense_h_to_4h.weight")), "b_up": t(pre + "mlp.dense_h_to_4h.bias"),
             "w_down": W(t(pre + "mlp.dense_4h_to_h.weight")), "b_down": t(pre + "mlp.dense_4h_to_h.bias")}
        w.append(p)
    emb = t("gpt_neox.embed_in.weight")
    head = emb if cfg.get("tie_word_embeddings", False) else t("embed_out.weight")
    act = {"gelu": "gelu_erf", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}[cfg.get("hidden_act", "gelu")]
    return Model(block=GPTNeoXLayer, n_layer=nl, d=d, nh=nh, nkv=nh, hd=hd, vocab=emb.shape[0], norm_kind="layer",
                 eps=cfg.get("layer_norm_eps", 1e-5), act=act, attn_scale=hd ** -0.5,
                 parallel_residual=cfg.get("use_parallel_residual", True), layers=layers, w=w, tok_emb=emb,
                 out_norm=t("gpt_neox.final_layer_norm.weight"), out_norm_b=t("gpt_neox.final_layer_norm.bias"),
                 lm_head=W(head), L0=hf_L0(cfg, rps))


def hf_gpt2(cfg, t):
    """GPT2LMHeadModel: learned positions wpe, Conv1D weights stored [in, out]."""
    d, nh, nl = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    hd = d // nh
    if cfg.get("scale_attn_by_inverse_layer_idx") or cfg.get("reorder_and_upcast_attn"):
        raise OracleError("GPT-2 scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn not implemented")
    w = []
    for i in range(nl):
        pre = f"transformer.h.{i}."
        qkv, qkvb = t(pre + "attn.c_attn.weight").T, t(pre + "attn.c_attn.bias")
        p = {"wq": W(qkv[:d]), "wk": W(qkv[d:2 * d]), "wv": W(qkv[2 * d:]),
             "bq": qkvb[:d], "bk": qkvb[d:2 * d], "bv": qkvb[2 * d:],
             "wo": W(t(pre + "attn.c_proj.weight").T), "bo": t(pre + "attn.c_proj.bias"),
             "attn_norm": t(pre + "ln_1.weight"), "attn_norm_b": t(pre + "ln_1.bias"),
             "ffn_norm": t(pre + "ln_2.weight"), "ffn_norm_b": t(pre + "ln_2.bias"),
             "w_up": W(t(pre + "mlp.c_fc.weight").T), "b_up": t(pre + "mlp.c_fc.bias"),
             "w_down": W(t(pre + "mlp.c_proj.weight").T), "b_down": t(pre + "mlp.c_proj.bias")}
        w.append(p)
    emb = t("transformer.wte.weight")
    act = {"gelu_new": "gelu_tanh", "gelu": "gelu_erf", "gelu_pytorch_tanh": "gelu_tanh"}[
        cfg.get("activation_function", "gelu_new")]
    return Model(block=GPT2Block, n_layer=nl, d=d, nh=nh, nkv=nh, hd=hd, vocab=emb.shape[0], norm_kind="layer",
                 eps=cfg.get("layer_norm_epsilon", 1e-5), act=act,
                 attn_scale=hd ** -0.5 if cfg.get("scale_attn_weights", True) else 1.0,
                 layers=[Layer(None, None) for _ in range(nl)], w=w, tok_emb=emb,
                 pos_emb=t("transformer.wpe.weight"), n_positions=cfg["n_positions"],
                 out_norm=t("transformer.ln_f.weight"), out_norm_b=t("transformer.ln_f.bias"), lm_head=W(emb),
                 L0=cfg["n_positions"])


# ============================================================================================== GGUF files
GGUF_NORM_ROPE = {"llama", "smollm3"}                       # llama_model_rope_type: LLAMA_ROPE_TYPE_NORM
GGUF_NEOX_ROPE = {"qwen2", "qwen3", "gemma2", "gemma3", "phi3", "olmo2", "gptneox"}   # LLAMA_ROPE_TYPE_NEOX
GGUF_ARCHS = GGUF_NORM_ROPE | GGUF_NEOX_ROPE | {"gpt2"}


def load_gguf(g, name=None, honour_yarn_keys=False, freq_base_override=None, freq_scale_override=None):
    """A GGUF as llama.cpp runs it: llama_model::load_hparams (generic keys, then the arch's own), llama_context's
    cparams (yarn ext_factor / attn_factor), the arch's graph (src/models/<arch>.cpp).  honour_yarn_keys applies
    rope.scaling.yarn_beta_fast / yarn_beta_slow / yarn_ext_factor / yarn_attn_factor, which llama.cpp reads only for
    some architectures (not llama, qwen*, gemma*, phi3, smollm3, olmo2, gptneox): the numbers llama.cpp gives with
    the same values passed as --yarn-beta-fast etc.  freq_base_override / freq_scale_override = llama.cpp
    --rope-freq-base / --rope-freq-scale (context parameters: they reach the non-sliding layers only)."""
    if isinstance(g, str):
        g = GGUF(g)
    arch = g.arch
    if arch not in GGUF_ARCHS:
        raise OracleError(f"{g.path}: general.architecture '{arch}' not supported")
    k = g.key
    notes = []
    d, nl, nh = k("embedding_length"), k("block_count"), k("attention.head_count")
    nkv = k("attention.head_count_kv", nh)
    hd = k("attention.key_length", d // nh)
    n_rot = k("rope.dimension_count", hd)
    n_ctx_train = k("context_length")
    freq_base_train = float(k("rope.freq_base", 10000.0))
    if k("rope.freq_base") is None and arch != "gpt2":
        notes.append("rope.freq_base absent: llama.cpp's default 10000")
    freq_base = float(freq_base_override) if freq_base_override else freq_base_train
    scaling = k("rope.scaling.type", "linear")
    if scaling not in ("none", "linear", "yarn", "longrope"):
        raise OracleError(f"{g.path}: {arch}.rope.scaling.type '{scaling}' unknown")
    factor = k("rope.scaling.factor", 0.0) or k("rope.scale_linear", 0.0) or 0.0
    freq_scale_train = 1.0 / factor if factor else 1.0
    freq_scale = float(freq_scale_override) if freq_scale_override else freq_scale_train
    if scaling == "none":
        freq_scale = 1.0
    n_ctx_orig = int(k("rope.scaling.original_context_length", n_ctx_train))
    rope_attn_factor = float(k("rope.scaling.attn_factor", 1.0))
    if not (math.isfinite(rope_attn_factor) and rope_attn_factor > 0):
        raise OracleError(f"{g.path}: {arch}.rope.scaling.attn_factor = {rope_attn_factor} must be finite and > 0")
    if not (math.isfinite(factor) and factor >= 0):
        raise OracleError(f"{g.path}: {arch}.rope.scaling.factor = {factor} must be finite and >= 0 (0: none)")
    beta_fast, beta_slow, ext, yarn_attn = 32.0, 1.0, -1.0, 1.0          # llama_hparams defaults
    if honour_yarn_keys:
        beta_fast = float(k("rope.scaling.yarn_beta_fast", beta_fast))
        beta_slow = float(k("rope.scaling.yarn_beta_slow", beta_slow))
        ext = float(k("rope.scaling.yarn_ext_factor", ext))
        yarn_attn = float(k("rope.scaling.yarn_attn_factor", yarn_attn))
    else:
        for key in ("yarn_beta_fast", "yarn_beta_slow", "yarn_ext_factor", "yarn_attn_factor", "yarn_log_multiplier"):
            if k("rope.scaling." + key) is not None:
                notes.append(f"{arch}.rope.scaling.{key} present: llama.cpp does not read it for arch {arch}")
    if ext < 0:                                                           # llama_context: 'not set'
        ext = 1.0 if scaling == "yarn" else 0.0
    if ext != 0:
        f = 1.0 / freq_scale
        yarn_attn = (1.0 if f <= 1 else 0.1 * math.log(f) + 1.0) / (1.0 + 0.1 * math.log(f))
    attn_factor = yarn_attn * rope_attn_factor

    def tens(name):
        return W(g.tensor(name), g.tensor_type(name))

    def vec(name, required=True):
        if not g.has_tensor(name):
            if required:
                raise OracleError(f"{g.path}: tensor {name} missing")
            return None
        return g.tensor(name)

    rope_extra = {}
    if g.has_tensor("rope_freqs.weight"):
        rope_extra["freq_factors"] = g.tensor("rope_freqs.weight")
    elif g.has_tensor("rope_factors_long.weight"):
        rope_extra["long_factors"] = g.tensor("rope_factors_long.weight")
        rope_extra["short_factors"] = g.tensor("rope_factors_short.weight")

    # sliding windows and per-layer RoPE base / scale (llama_hparams::set_swa_pattern, get_rope_freq_base/scale)
    swa = [False] * nl
    n_swa = k("attention.sliding_window")
    base_swa, scale_swa = freq_base_train, freq_scale_train      # rope_freq_{base,scale}_train_swa defaults
    if arch in ("gemma2", "gemma3", "olmo2") and n_swa:
        pat = k("attention.sliding_window_pattern")
        if pat is None:
            pat = {"gemma2": 2, "gemma3": 6, "olmo2": 4}[arch]
            notes.append(f"{arch}.attention.sliding_window_pattern absent: llama.cpp's default period {pat}")
        if isinstance(pat, list):
            swa = [bool(x) for x in pat[:nl]]
        else:
            swa = [pat == 0 or (il % pat < pat - 1) for il in range(nl)]
        if arch == "gemma3":
            base_swa, scale_swa = float(k("rope.freq_base_swa", 10000.0)), 1.0
        elif arch == "olmo2":
            base_swa, scale_swa = float(k("rope.freq_base_swa", freq_base_train)), 1.0
    elif n_swa:
        notes.append(f"{arch}.attention.sliding_window = {n_swa} present: llama.cpp {arch} runs full attention")

    layers = []
    for il in range(nl):
        if arch == "gpt2" or (arch == "smollm3" and (il + 1) % 4 == 0):   # smollm3: n_no_rope_layer_step = 4
            rope = None
        else:
            fs = scale_swa if swa[il] else freq_scale
            rope = Rope(n_rot, arch in GGUF_NEOX_ROPE, base_swa if swa[il] else freq_base, "ggml", freq_scale=fs,
                        ext_factor=0.0 if (arch == "olmo2" and swa[il]) else ext,
                        attn_factor=1.0 if (arch == "olmo2" and swa[il]) else attn_factor,
                        beta_fast=beta_fast, beta_slow=beta_slow, n_ctx_orig=n_ctx_orig, **rope_extra)
        layers.append(Layer(rope, n_swa if swa[il] else None))

    w = []
    for il in range(nl):
        pre = f"blk.{il}."
        p = {}
        if g.has_tensor(pre + "attn_qkv.weight"):
            qkv, qkvt = g.tensor(pre + "attn_qkv.weight"), g.tensor_type(pre + "attn_qkv.weight")
            parts = np.split(qkv, [nh * hd, nh * hd + nkv * hd])      # llm_graph_context::build_qkv views
            p["wq"], p["wk"], p["wv"] = (W(x, qkvt) for x in parts)
            b = vec(pre + "attn_qkv.bias", False)
            if b is not None:
                p["bq"], p["bk"], p["bv"] = np.split(b, [nh * hd, nh * hd + nkv * hd])
        else:
            for c in "qkv":
                p["w" + c] = tens(pre + f"attn_{c}.weight")
                b = vec(pre + f"attn_{c}.bias", False)
                if b is not None:
                    p["b" + c] = b
        p["wo"] = tens(pre + "attn_output.weight")
        p["bo"] = vec(pre + "attn_output.bias", False)
        p["attn_norm"] = vec(pre + "attn_norm.weight", arch != "olmo2")
        p["attn_norm_b"] = vec(pre + "attn_norm.bias", False)
        p["ffn_norm"] = vec(pre + "ffn_norm.weight", arch != "olmo2")
        p["ffn_norm_b"] = vec(pre + "ffn_norm.bias", False)
        p["post_attn_norm"] = vec(pre + "post_attention_norm.weight", False)
        p["post_ffn_norm"] = vec(pre + "post_ffw_norm.weight", False)
        p["q_norm"] = vec(pre + "attn_q_norm.weight", False)
        p["k_norm"] = vec(pre + "attn_k_norm.weight", False)
        if arch == "phi3":          # LLM_FFN_SWIGLU on the fused ffn_up: first half gate, second half up
            up, ut = g.tensor(pre + "ffn_up.weight"), g.tensor_type(pre + "ffn_up.weight")
            p["w_gate"], p["w_up"] = (W(x, ut) for x in np.split(up, 2))
        else:
            if g.has_tensor(pre + "ffn_gate.weight"):
                p["w_gate"] = tens(pre + "ffn_gate.weight")
            p["w_up"] = tens(pre + "ffn_up.weight")
            p["b_up"] = vec(pre + "ffn_up.bias", False)
        p["w_down"] = tens(pre + "ffn_down.weight")
        p["b_down"] = vec(pre + "ffn_down.bias", False)
        w.append({a: b for a, b in p.items() if b is not None})
    emb = g.tensor("token_embd.weight")
    head = tens("output.weight") if g.has_tensor("output.weight") else W(emb, g.tensor_type("token_embd.weight"))
    gemma = arch in ("gemma2", "gemma3")
    block = {"gemma2": Gemma2DecoderLayer, "gemma3": Gemma2DecoderLayer, "olmo2": Olmo2DecoderLayer,
             "gptneox": GPTNeoXLayer, "gpt2": GPT2Block}.get(arch, LlamaDecoderLayer)
    layer_norm = arch in ("gptneox", "gpt2")
    eps = k("attention.layer_norm_epsilon") if layer_norm else k("attention.layer_norm_rms_epsilon")
    if gemma:     # f_attention_scale: 1/sqrt(n_embd/n_head) for the 27B sizes (46 / 62 layers), else 1/sqrt(head_dim)
        big = (arch == "gemma2" and nl == 46) or (arch == "gemma3" and nl == 62)
        scale = 1.0 / math.sqrt(d / nh) if big else 1.0 / math.sqrt(hd)
    else:
        scale = 1.0 / math.sqrt(hd)
    m = Model(block=block, n_layer=nl, d=d, nh=nh, nkv=nkv, hd=hd, vocab=emb.shape[0],
              norm_kind="layer" if layer_norm else "rms", eps=float(eps), act="gelu_tanh" if (gemma or layer_norm)
              else "silu", attn_scale=scale, emb_scale=float(np.float32(math.sqrt(d))) if gemma else None,
              attn_softcap=float(k("attn_logit_softcapping", 50.0)) if arch == "gemma2" else None,
              final_softcap=(float(k("final_logit_softcapping", 30.0)) if arch == "gemma2" else
                             (k("final_logit_softcapping") if arch == "gemma3" else None)),
              qk_norm={"qwen3": "head", "gemma3": "head", "olmo2": "full"}.get(arch),
              parallel_residual=bool(k("use_parallel_residual", True)) if arch == "gptneox" else False,
              layers=layers, w=w, tok_emb=emb, out_norm=g.tensor("output_norm.weight"),
              out_norm_b=vec("output_norm.bias", False), lm_head=head, L0=n_ctx_orig)
    if arch == "gpt2":
        m.pos_emb = g.tensor("position_embd.weight")
        m.n_positions = m.pos_emb.shape[0]
        m.L0 = n_ctx_train
    m.name, m.source, m.family, m.tokenizer, m.notes = name or os.path.basename(g.path), "gguf", arch, \
        gguf_tokenizer(g), notes
    m.gguf = g
    return m


# ============================================================================================== protocols
def read_text(path):
    return open(path, "rb").read().decode("utf-8")


def documents(text):
    """posenc protocol 1: cut at lines that are exactly '<|endoftext|>'; one '\\n' stripped at each side."""
    lines_at = []
    i = text.find(SEP)
    while i >= 0:
        if (i == 0 or text[i - 1] == "\n") and (i + len(SEP) == len(text) or text[i + len(SEP)] == "\n"):
            lines_at.append(i)
        i = text.find(SEP, i + 1)
    if not lines_at:
        return [text]
    pieces, prev = [], 0
    for i in lines_at:
        pieces.append(text[prev:i])
        prev = i + len(SEP)
    pieces.append(text[prev:])
    out = []
    for p in pieces:
        if p.startswith("\n"):
            p = p[1:]
        if p.endswith("\n"):
            p = p[:-1]
        out.append(p)
    return out


def posenc_stream(tok, text):
    ids = []
    for doc in documents(text):
        ids.extend(tok.encode(doc, bos=True))
    return ids


def ids_sha256(ids):
    return hashlib.sha256(np.asarray(ids, dtype="<i4").tobytes()).hexdigest()


def stream_info(ids, N):
    return dict(length=len(ids), first_16=[int(x) for x in ids[:16]], sha256_all=ids_sha256(ids),
                sha256_first_N_plus_1=ids_sha256(ids[:N + 1]))


def method_inputs(m, method, L):
    """(per-layer ropes, learned position rows) for posenc's method at context L (protocol 3)."""
    s = max(1.0, L / m.L0)
    if m.pos_emb is not None:
        if method in ("native", "none"):
            if L > m.n_positions:
                raise OracleError(f"context {L} is past the learned position table (n_positions {m.n_positions})")
            return None, m.pos_emb[:L]
        if method == "linear":
            p = np.arange(L, dtype=np.float64) / s
            i0 = np.minimum(np.floor(p).astype(np.int64), m.n_positions - 1)
            i1 = np.minimum(i0 + 1, m.n_positions - 1)
            f = (p - i0).astype(np.float32)[:, None]
            f = np.where((np.floor(p) >= m.n_positions - 1)[:, None], np.float32(0), f)
            return None, (m.pos_emb[i0] * (np.float32(1) - f) + m.pos_emb[i1] * f).astype(np.float32)
        raise OracleError(f"method {method} needs RoPE; {m.name} has learned absolute positions")
    if method == "native":
        return [l.rope for l in m.layers], None
    changed = [any(l is c for c in method_layers(m)) for l in m.layers]
    return [method_rope(l.rope, method, s, m.L0) if c else l.rope for l, c in zip(m.layers, changed)], None


def method_layers(m):
    """The layers a method other than native changes (protocol 3): every layer with RoPE, except that where the RoPE
    layers mix sliding and full attention, the sliding ones keep the file's RoPE.  Any window makes a layer sliding,
    one at least as long as the context included."""
    rope_layers = [l for l in m.layers if l.rope is not None]
    mixed = len({l.window is None for l in rope_layers}) == 2
    return [l for l in rope_layers if not (mixed and l.window is not None)]


def log_softmax64(z):
    z = z.astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def buckets_for(L, L0):
    edges = [0, L0 // 2, L0]
    while edges[-1] < L:
        edges.append(edges[-1] * 2)
    return [(a, b) for a, b in zip(edges, edges[1:]) if b <= L]


def position_map_inputs(m, pmap):
    """(per-layer ropes, per-layer maps) of a position-map method: the file's own RoPE on every layer, the map on
    the layers a method changes (method_layers), plain attention elsewhere."""
    changed = [any(l is c for c in method_layers(m)) for l in m.layers]
    return [l.rope for l in m.layers], [pmap if c else None for c in changed]


def posenc_eval(m, stream, L, method, N, tokens_per_batch=None, pmap=None):
    """posenc protocol 2 + 3: ppl, mean NLL, its standard error over windows, buckets.  With pmap (a dict for
    position_map_plan) the method is that position map over the file's own RoPE."""
    if N % L or N + 1 > len(stream):
        raise OracleError(f"N={N} must be a multiple of L={L} with N+1 <= stream length {len(stream)}")
    pmaps = None
    if pmap is not None:
        ropes, pmaps = position_map_inputs(m, pmap)
        rows = None
    else:
        ropes, rows = method_inputs(m, method, L)
    nw = N // L
    B = max(1, (tokens_per_batch or min(4096, 2 ** 24 // m.vocab)) // L)
    ids = np.asarray(stream[:N + 1], dtype=np.int64)
    nll = np.empty((nw, L))
    for w0 in range(0, nw, B):
        w1 = min(nw, w0 + B)
        x = np.stack([ids[w * L:w * L + L] for w in range(w0, w1)])
        y = np.stack([ids[w * L + 1:w * L + L + 1] for w in range(w0, w1)])
        lp = log_softmax64(forward(m, x, ropes, rows, pmaps))
        nll[w0:w1] = -np.take_along_axis(lp, y[..., None], axis=-1)[..., 0]
    win = nll.mean(axis=1)
    mu = float(nll.mean())
    res = dict(ctx=L, method=method, ppl=math.exp(mu), nll_mean=mu,
               nll_se=float(win.std(ddof=1) / math.sqrt(nw)) if nw > 1 else None, n_units=nw, buckets={})
    for a, b in buckets_for(L, m.L0):
        bm = float(nll[:, a:b].mean())
        res["buckets"][f"{a}-{b}"] = dict(ppl=math.exp(bm), nll_mean=bm)
    return res


def llama_perplexity(m, tokens, C, K=8):
    """llama.cpp tools/perplexity perplexity(): chunks of C, first token BOS where the vocabulary adds one, second
    half scored, first K chunks; ppl, its +- and the running values."""
    n_chunk = min(K, len(tokens) // C)
    if len(tokens) < 2 * C:
        raise OracleError(f"{len(tokens)} tokens: llama-perplexity needs at least 2*ctx = {2 * C}")
    first = C // 2
    nll = nll2 = 0.0
    count = 0
    running = []
    for c in range(n_chunk):
        chunk = np.asarray(tokens[c * C:(c + 1) * C], dtype=np.int64).copy()
        if m.tokenizer.bos_id is not None:
            chunk[0] = m.tokenizer.bos_id
        lp = log_softmax64(forward(m, chunk[None])[0])
        v = -lp[np.arange(first, C - 1), chunk[first + 1:C]]
        nll += float(v.sum())
        nll2 += float((v * v).sum())
        count += C - 1 - first
        running.append(math.exp(nll / count))
    mean, mean2 = nll / count, nll2 / count
    ppl = math.exp(mean)
    var = mean2 - mean * mean
    pm = math.sqrt(var / (count - 1)) * ppl if var > 0 else None
    return dict(ctx=C, chunks=n_chunk, ppl=ppl, pm=pm, running=running, n_scored=count)


def document_tokens(tok, text):
    """Every document of the text (protocol 1's cut) tokenized without special tokens."""
    return [tok.encode(d, bos=False) for d in documents(text)]


def yarn_windows(docs, L, bos, stride, truncate, min_doc_tokens, budget):
    """The windows of YaRN's eval/perplexity.py compute_perplexity over documents (sliding, or --truncate), as that
    function builds them: max_tokenized_len = L - 1 when a BOS is prepended (else L); with truncate every document
    is cut to max_tokenized_len and the window step becomes max_tokenized_len; for begin_loc in range(0, seq_len,
    stride): end_loc = min(begin_loc + max_tokenized_len, seq_len), trg_len = end_loc - prev_end_loc, input =
    [BOS] + doc[begin_loc:end_loc], labels = input with labels[:-trg_len] = -100 (HF's loss then shifts: logits at
    t score labels[t + 1]); stop when end_loc == seq_len.  Documents: those of at least min_doc_tokens tokens (and
    at least one prediction), in file order until their tokens reach `budget` (None: all).
    Returns ([(unit, input, labels)], [document index of each unit])."""
    max_tok = L - 1 if bos is not None else L
    if truncate:
        stride = max_tok
    wins, units, used = [], [], 0
    for d, toks in enumerate(docs):
        if budget is not None and used >= budget:
            break
        if len(toks) < max(min_doc_tokens, 1 if bos is not None else 2):
            continue
        used += len(toks)
        u = len(units)
        units.append(d)
        seq = toks[:max_tok] if truncate else toks
        prev_end = 0
        for begin in range(0, len(seq), stride):
            end = min(begin + max_tok, len(seq))
            trg_len = end - prev_end
            inp = ([bos] if bos is not None else []) + seq[begin:end]
            labels = list(inp)
            if trg_len < len(labels):
                labels[:len(labels) - trg_len] = [-100] * (len(labels) - trg_len)
            wins.append((u, inp, labels))
            prev_end = end
            if end == len(seq):
                break
    return wins, units


def yarn_eval(m, docs, L, method, stride=256, truncate=False, average="windows", min_doc_tokens=0, budget=None):
    """YaRN's sliding / truncate perplexity at window length L with posenc's method at L (protocol 3): ppl =
    exp(mean over windows of each window's mean NLL) (average windows) or exp(mean over every scored token)
    (average tokens, HF's perplexity guide).  Units of the SE: documents; a document's value is the mean of its
    windows' means (average windows) or its token mean (average tokens); nll_se = std(ddof=1) / sqrt(n)."""
    ropes, rows = method_inputs(m, method, L)
    wins, units = yarn_windows(docs, L, m.tokenizer.bos_id, stride, truncate, min_doc_tokens, budget)
    win_mean, win_unit, tokens = [], [], []
    per_unit = [[] for _ in units]
    for u, inp, labels in wins:
        lp = log_softmax64(forward(m, np.asarray([inp], dtype=np.int64), ropes,
                                   None if rows is None else rows[:len(inp)])[0])
        v = [-lp[t, labels[t + 1]] for t in range(len(inp) - 1) if labels[t + 1] != -100]
        win_mean.append(float(np.mean(v)))
        win_unit.append(u)
        tokens.extend(v)
        per_unit[u].append(v)
    if average == "windows":
        mu = float(np.mean(win_mean))
        unit_vals = [float(np.mean([np.mean(v) for v in w])) for w in per_unit]
    else:
        mu = float(np.mean(tokens))
        unit_vals = [float(np.mean(np.concatenate(w))) for w in per_unit]
    n = len(unit_vals)
    return dict(ctx=L, method=method, protocol="truncate" if truncate else "sliding", stride=stride, average=average,
                min_doc_tokens=min_doc_tokens, tokens=budget, ppl=math.exp(mu), nll_mean=mu,
                nll_se=float(np.std(unit_vals, ddof=1) / math.sqrt(n)) if n > 1 else None, n_units=n,
                n_windows=len(wins), n_scored=len(tokens),
                documents=[dict(index=d, tokens=int(sum(len(v) for v in w)), nll_mean=val)
                           for d, w, val in zip(units, per_unit, unit_vals)])


def kl_eval(m, stream, L, method, s, N):
    """KL(none || method) over posenc's windows at L with a fixed factor s: per prediction
    sum_v p_none(v) (log p_none(v) - log p_method(v)); its mean, 99th percentile (numpy's linear interpolation),
    the fraction of equal argmax tokens and the mean of p_method(target) - p_none(target)."""
    ids = np.asarray(stream[:N + 1], dtype=np.int64)
    x = np.stack([ids[w * L:w * L + L] for w in range(N // L)])
    y = np.stack([ids[w * L + 1:w * L + L + 1] for w in range(N // L)])
    lp_b = log_softmax64(forward(m, x, [method_rope(l.rope, "none", s, m.L0) for l in m.layers]))
    lp_m = log_softmax64(forward(m, x, [method_rope(l.rope, method, s, m.L0) for l in m.layers]))
    kl = (np.exp(lp_b) * (lp_b - lp_m)).sum(axis=-1).reshape(-1)
    top1 = (lp_b.argmax(axis=-1) == lp_m.argmax(axis=-1)).reshape(-1)
    pt_b = np.exp(np.take_along_axis(lp_b, y[..., None], axis=-1)[..., 0]).reshape(-1)
    pt_m = np.exp(np.take_along_axis(lp_m, y[..., None], axis=-1)[..., 0]).reshape(-1)
    return dict(ctx=L, method=method, factor=s, tokens=N, kl_mean=float(kl.mean()), kl_p99=float(np.percentile(kl, 99)),
                top1_agree=float(top1.mean()), dp_mean=float((pt_m - pt_b).mean()))


def protocol_reference(out_path):
    """tests/data/protocol_ref.json: stories260K-F32.gguf (tok512.bin) under the sliding and truncate protocols
    (yarn_eval) and llama-perplexity (llama_perplexity), at short contexts and past L0."""
    tok512 = Tokenizer(read_llama2c_tokenizer(os.path.join(REPO, "data", "tok512.bin"), 512), 1,
                       "llama2.c tok512.bin (llama2.c encode), BOS 1")
    m = load_gguf(os.path.join(REPO, "tests", "data", "models", "stories260K-F32.gguf"))
    m.tokenizer = tok512
    m.numerics = "exact"
    text = read_text(TEXT)
    docs = document_tokens(tok512, text)
    rows = []
    for kw in [dict(L=128, method="none", stride=64, budget=4096),
               dict(L=128, method="none", stride=64, average="tokens", budget=4096),
               dict(L=128, method="none", stride=200, budget=2048),
               dict(L=256, method="none", stride=256, budget=4096),
               dict(L=1024, method="yarn", stride=256, budget=8192, min_doc_tokens=300),
               dict(L=128, method="none", truncate=True, min_doc_tokens=150, budget=4096),
               dict(L=1024, method="linear", truncate=True, budget=8192)]:
        t0 = time.time()
        L = kw.pop("L")
        meth = kw.pop("method")
        rows.append(yarn_eval(m, docs, L, meth, **kw))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "documents"}), f"{time.time() - t0:.0f}s",
              flush=True)
    kl_rows = [kl_eval(m, posenc_stream(tok512, text), 128, meth, 2.0, 512) for meth in ("linear", "ntk")]
    whole = tok512.encode(text, bos=True)
    lp_rows = []
    for C in (128, 256):
        r = llama_perplexity(m, whole, C, K=8)
        r["method"] = "none"
        lp_rows.append(r)
    out = dict(about="stories260K-F32.gguf tokenized with data/tok512.bin (llama2.c encode), text "
                     "data/text/tinystories_val_stories.txt; rows: tests/oracle/arch_oracle.py yarn_eval "
                     "(YaRN's compute_perplexity windows, sliding or truncate), llama_perplexity_rows: "
                     "llama_perplexity (8 chunks); kl_rows: kl_eval (posenc protocol, KL against none)", rows=rows,
               llama_perplexity_rows=lp_rows, kl_rows=kl_rows)
    json.dump(out, open(out_path, "w"), indent=1, allow_nan=False)
    print(f"wrote {out_path}")


# ============================================================================================== llama.cpp runs
GGUF_TYPE_OF = {"int": 4, "float": 6, "bool": 7, "str": 8}


def parse_llamacpp_flags(flags):
    """The llama.cpp invocations arch_ppl.json records -> load_gguf arguments and metadata changes."""
    out = dict(kv=[], freq_base=None, freq_scale=None, pre=None, tensor_edit=None)
    if not flags:
        return out
    if flags.startswith("(copy of the GGUF with "):
        key, val = flags[len("(copy of the GGUF with "):-1].split(" = ")
        out["kv"].append((key, 4, int(val)))
        return out
    if flags.startswith("(copy of the GGUF, tensor "):
        name, how = flags[len("(copy of the GGUF, tensor "):-1].split(": ")
        out["tensor_edit"] = (name, how)
        return out
    tok = flags.split()
    i = 0
    while i < len(tok):
        f = tok[i]
        if f == "--rope-freq-base":
            out["freq_base"] = float(tok[i + 1])
        elif f == "--rope-scale":
            out["freq_scale"] = 1.0 / float(tok[i + 1])
        elif f == "--rope-scaling":
            out["kv"].append(("__scaling__", 8, tok[i + 1]))
        elif f == "--override-kv":
            key, tv = tok[i + 1].split("=", 1)
            t, v = tv.split(":", 1)
            v = {"int": int, "float": float, "bool": lambda x: x == "true", "str": str}[t](v)
            if key == "tokenizer.ggml.pre":
                out["pre"] = v
            else:
                out["kv"].append((key, GGUF_TYPE_OF[t], v))
        else:
            raise OracleError(f"llama.cpp flag {f} not understood")
        i += 2
    return out


def llamacpp_model(path, flags=None, base_kv=(), numerics="exact", override_kv=False):
    """A GGUF (with metadata changes) as llama.cpp runs it with `flags`.  --override-kv reaches only keys llama.cpp
    reads with get_key; a key it reads with get_key_or_arr and the file lacks (sliding_window_pattern) is not
    overridable (llama.cpp returns before consulting overrides), so such an override is dropped here too."""
    f = parse_llamacpp_flags(flags)
    g = GGUF(path)
    kv = list(base_kv)
    for key, t, v in f["kv"]:
        if key == "__scaling__":
            kv.append((f"{g.arch}.rope.scaling.type", 8, v))
        elif flags.startswith("--override-kv") and key.endswith("sliding_window_pattern") and key not in g.kv:
            continue
        else:
            kv.append((key, t, v))
    if kv:
        g = GGUF.from_bytes(g.with_kv(kv), path)
    m = load_gguf(g, name=os.path.basename(path), freq_base_override=f["freq_base"],
                  freq_scale_override=f["freq_scale"])
    if f["pre"]:
        m.tokenizer = gguf_tokenizer(g, pre_override=f["pre"])
    if f["tensor_edit"]:
        name, how = f["tensor_edit"]
        if name != "position_embd.weight":
            raise OracleError(f"tensor edit of {name} not supported")
        m.pos_emb = np.zeros_like(m.pos_emb) if how == "zero" else np.concatenate([m.pos_emb[1:], m.pos_emb[-1:]])
    m.numerics = numerics
    return m


# ============================================================================================== check
class TokenCache:
    def __init__(self, text):
        self.text, self.whole = text, {}

    @staticmethod
    def key(m):
        """The tokenizer's origin (file), kind and BOS rule."""
        return (m.gguf.path if m.source == "gguf" else m.name, m.tokenizer.describe, m.tokenizer.bos_id)

    def whole_text(self, m):
        k = self.key(m)
        if k not in self.whole:
            self.whole[k] = m.tokenizer.encode(self.text, bos=True)
        return self.whole[k]


def rel(a, b):
    return abs(a - b) / abs(b)


def compare_row(ours, ref):
    r = dict(ctx=ref["ctx"], ref_ppl=ref["ppl"], ppl=ours["ppl"], rel_ppl=rel(ours["ppl"], ref["ppl"]))
    if ref.get("pm") is not None and ours.get("pm") is not None:
        r["rel_pm"] = rel(ours["pm"], ref["pm"])
    if ref.get("running"):
        r["rel_running_max"] = max(rel(a, b) for a, b in zip(ours["running"], ref["running"]))
    if ref.get("skip"):
        r["skip"] = ref["skip"]
    return r


def check(shared, out_json=None, only=None):
    ref = json.load(open(os.path.join(REPO, "tests", "data", "arch_ppl.json")))
    if only:
        ref["fixtures"] = {k: v for k, v in ref["fixtures"].items() if k in only}
    arch_dir = os.path.join(shared, "models", "arch")
    tc = TokenCache(read_text(TEXT))
    report = {}
    for fname, fx in ref["fixtures"].items():
        t0 = time.time()
        path = os.path.join(arch_dir, fname)
        recs = []

        def run(what, model_fn, rows, numerics_list=("exact", "ggml")):
            for numerics in numerics_list:
                m = model_fn(numerics)
                toks = tc.whole_text(m)
                for row in rows:
                    if "ppl" not in row:
                        continue
                    ours = llama_perplexity(m, toks, row["ctx"])
                    c = compare_row(ours, row)
                    c.update(what=what, numerics=numerics, n_tokens=len(toks))
                    recs.append(c)
        run("rows", lambda n: llamacpp_model(path, numerics=n), fx["rows"])
        for other, rows in fx.get("also", {}).items():
            run(f"also {other}", lambda n, o=other: llamacpp_model(os.path.join(arch_dir, o), numerics=n), rows,
                ("exact", "ggml", "ggml64"))
        folder = os.path.join(arch_dir, fx["hf_folder"])
        hf = load_hf(folder)
        toks = tc.whole_text(hf)
        for row in fx["hf_rows"]:
            c = compare_row(llama_perplexity(hf, toks, row["ctx"]), row)
            c.update(what="hf_rows", numerics="exact", n_tokens=len(toks))
            recs.append(c)
        tv = fx["tokenization_vs_hf_folder"]["perplexity_tokenization_vs_hf_plain"]
        gm = llamacpp_model(path)      # the reference counts leave the leading BOS out
        n_gguf = len(tc.whole_text(gm)) - (gm.tokenizer.bos_id is not None)
        n_hf = len(toks) - (hf.tokenizer.bos_id is not None)
        recs.append(dict(what="token counts (no BOS)", n_llama_ref=tv["n_llama"], n_llama=n_gguf,
                         n_hf_ref=tv["n_hf"], n_hf=n_hf, equal=(n_gguf == tv["n_llama"] and n_hf == tv["n_hf"])))
        hff = fx.get("hf_faithful_rows")
        base_kv = ()
        if hff:
            if fx["family"] == "gemma3":
                base_kv = ((f"{fx['family']}.attention.sliding_window_pattern", 4, 3),)
                run("hf_faithful_rows", lambda n: llamacpp_model(path, base_kv=base_kv, numerics=n), hff["rows"])
                for s in hff.get("sensitivity", []):
                    run(f"hf_faithful sensitivity: {s['flags']}",
                        lambda n, s=s: llamacpp_model(path, s.get("flags"), base_kv=base_kv, numerics=n), [s])
            elif fx["family"] == "phi3":
                run("hf_faithful_rows", lambda n: llamacpp_model(
                    path, "--override-kv phi3.rope.scaling.original_context_length=int:256", numerics=n), hff["rows"])
        htr = fx.get("hf_tokenization_row")
        if htr:
            run("hf_tokenization_row", lambda n: llamacpp_model(path, htr["flags"], numerics=n), [htr])
        for s in fx.get("sensitivity", []):
            if s.get("ppl") is None or s.get("flags") is None:
                continue
            run(f"sensitivity: {s['flags']}", lambda n, s=s: llamacpp_model(path, s["flags"], numerics=n), [s])
        report[fname] = recs
        worst = {}
        for r in recs:
            if "rel_ppl" in r and not r.get("skip"):
                k = (r["what"].split(":")[0], r["numerics"])
                worst[k] = max(worst.get(k, 0.0), r["rel_ppl"], r.get("rel_pm", 0.0), r.get("rel_running_max", 0.0))
        print(f"{fname}: " + "; ".join(f"{a} [{b}] {v:.2e}" for (a, b), v in sorted(worst.items())) +
              f"  ({time.time() - t0:.0f}s)", flush=True)
        for r in recs:
            if r.get("skip") or r["what"].startswith("token counts"):
                print(f"    {r}")
    if out_json:
        json.dump(report, open(out_json, "w"), indent=1)
    return report


def check_formats(shared):
    """The llama family against tests/data/formats_ppl.json (posenc protocol, its `protocol` field): stories260K
    (GGUF F32 / F16 / BF16, HF folder; tok512.bin) and llama-mini-rand (HF folder, GGUF bf16 / q8_0 dequantized;
    sentencepiece on the folder's tokenizer.model, tinyshakespeare.txt).  Rows of the method `dynamic` are not
    this oracle's."""
    ref = json.load(open(os.path.join(REPO, "tests", "data", "formats_ppl.json")))["fixtures"]
    tok512 = Tokenizer(read_llama2c_tokenizer(os.path.join(REPO, "data", "tok512.bin"), 512), 1, "llama2.c tok512.bin")
    mini_dir = os.path.join(shared, "models", "llama-mini-rand")
    mini_tok = hf_tokenizer(mini_dir)
    report = {}
    for name, fx in ref.items():
        if name.endswith("Q4_K_M.gguf") or name.endswith("Q6_K.gguf"):
            continue
        stories = name.startswith("stories")
        base = os.path.join(REPO, "tests", "data", "models") if stories else os.path.join(shared, "models")
        path = os.path.join(base, name)
        tok = tok512 if stories else mini_tok
        if name.endswith(".gguf"):
            m = load_gguf(path)
            gguf_tok = m.tokenizer
            m.tokenizer = tok
        else:
            m = load_hf(path, tokenizer=tok)
            gguf_tok = None
        m.L0 = fx["train_ctx"]
        text = read_text(os.path.join(REPO, "data", "text", fx["text"]))
        stream = posenc_stream(tok, text)
        recs = [dict(what="stream", length=len(stream), ref_length=fx["stream_length"],
                     first_ids_equal=stream[:len(fx["first_ids"])] == fx["first_ids"])]
        if gguf_tok is not None and not stories:
            own = posenc_stream(gguf_tok, text)
            recs.append(dict(what="GGUF vocab (llama.cpp SentencePiece BPE) vs sentencepiece library",
                             equal=own == stream, length=len(own)))
        for row in fx["rows"]:
            if row["method"] == "dynamic":
                continue
            ours = posenc_eval(m, stream, row["ctx"], row["method"], fx["tokens"])
            recs.append(dict(what="row", ctx=row["ctx"], method=row["method"], ref=row["ppl"], ppl=ours["ppl"],
                             rel=rel(ours["ppl"], row["ppl"]),
                             rel_buckets=max(rel(ours["buckets"][k]["ppl"], v["ppl"]) for k, v in
                                             row["buckets"].items())))
        worst = max(max(r["rel"], r["rel_buckets"]) for r in recs if r["what"] == "row")
        print(f"{name}: max rel {worst:.2e}; " + "; ".join(str(r) for r in recs if r["what"] != "row"), flush=True)
        report[name] = recs
    return report


# ============================================================================================== references
ARCH_FOLDERS = ["qwen3", "gemma2", "gemma3", "gemma3-v5", "phi3", "mistral", "smollm3", "olmo2", "gptneox", "gpt2",
                "qwen2.5"]


def posenc_plan(m):
    """native at 64 and 256; every method past L0: at 2 n_positions for GPT-2, else at max(2048, 2 L0)."""
    far = 2 * m.n_positions if m.pos_emb is not None else max(2048, 2 * m.L0)
    return [(64, "native"), (256, "native")] + [(far, meth) for meth in METHODS]


def posenc_rows(m, stream, plan, N):
    rows = []
    for L, meth in plan:
        t0 = time.time()
        try:
            r = posenc_eval(m, stream, L, meth, N)
        except OracleError as e:
            r = dict(ctx=L, method=meth, error=str(e))
        rows.append(r)
        print(f"  {m.name} ctx {L} {meth}: " + (f"ppl {r['ppl']:.4f}" if "ppl" in r else r["error"]) +
              f" ({time.time() - t0:.1f}s)", flush=True)
    return rows


def layer_summary(m):
    out = []
    for l in m.layers:
        r = l.rope.describe() if l.rope else None
        if r:
            for k in ("long_factors", "short_factors", "freq_factors", "long_factor", "short_factor"):
                if k in r:
                    r[k] = f"{len(r[k])} values"
            inv, ms = l.rope.params(256)
            r["effective_at_ctx_256"] = dict(inv_freq=inv.tolist(), mscale=ms)
        out.append(dict(rope=r, window=l.window))
    return out


def fixture_entry(m, where, text, N, plan=None, lp_ctx=(64, 128, 256)):
    stream = posenc_stream(m.tokenizer, text)
    whole = m.tokenizer.encode(text, bos=True)
    e = dict(file=where, source=m.source, family=m.family, L0=m.L0, bos_id=m.tokenizer.bos_id,
             tokenizer=m.tokenizer.describe, notes=m.notes, layers=layer_summary(m), N=N,
             stream=stream_info(stream, N),
             posenc=posenc_rows(m, stream, plan or posenc_plan(m), N),
             llama_perplexity_tokens=dict(length=len(whole), first_16=[int(x) for x in whole[:16]],
                                          sha256_all=ids_sha256(whole)),
             llama_perplexity=[llama_perplexity(m, whole, C) for C in lp_ctx])
    return e


def jsonable(v):
    return str(v) if isinstance(v, float) and not math.isfinite(v) else v


def gguf_variant(path, changes, **kw):
    """A copy of the GGUF at `path` with `changes` = [(key, gguf type, value)] replacing or appending keys."""
    g = GGUF(path)
    data = g.with_kv(changes)
    m = load_gguf(GGUF.from_bytes(data, path), name=os.path.basename(path), **kw)
    type_names = {4: "u32", 6: "f32", 7: "bool", 8: "string"}
    how = [dict(key=k, type=type_names[t], value=jsonable(v)) for k, t, v in changes]
    return m, how, hashlib.sha256(data).hexdigest(), len(data)


def variants(shared, text, N=4096):
    arch = os.path.join(shared, "models", "arch")
    out = []

    def rows_for(m, ctxs=(128, 256), lp=(128,)):
        stream = posenc_stream(m.tokenizer, text)
        whole = m.tokenizer.encode(text, bos=True)
        return dict(stream=stream_info(stream, N), posenc=posenc_rows(m, stream, [(c, "native") for c in ctxs], N),
                    llama_perplexity=[llama_perplexity(m, whole, C) for C in lp])

    def clean(e):
        return str(e).replace(arch + os.sep, "")

    def hf_case(name, folder, how, cfg=None, tok=None):
        print(f"variant {name}", flush=True)
        try:
            m = load_hf(os.path.join(arch, folder), cfg, tok, name=name)
        except OracleError as e:
            out.append(dict(name=name, base=f"{folder}/ (fixture folder)", how=how, error=clean(e)))
            return
        out.append(dict(name=name, base=f"{folder}/ (fixture folder)", how=how, N=N, layers=layer_summary(m),
                        bos_id=m.tokenizer.bos_id, **rows_for(m)))

    def gguf_case(name, file, changes, note, **kw):
        print(f"variant {name}", flush=True)
        try:
            m, how, sha, size = gguf_variant(os.path.join(arch, file), changes, **kw)
        except OracleError as e:
            names = {4: "u32", 6: "f32", 7: "bool", 8: "string"}
            keys = [dict(key=k, type=names[t], value=jsonable(v)) for k, t, v in changes]
            out.append(dict(name=name, base=file, how=dict(append_or_replace_keys=keys), note=note, error=clean(e)))
            return
        out.append(dict(name=name, base=file, how=dict(append_or_replace_keys=how, note="keys replaced in place "
                                                         "or appended after the last key, in this order; tensor "
                                                         "infos and data unchanged", sha256=sha, bytes=size),
                        note=note, N=N, layers=layer_summary(m), **rows_for(m)))

    hf_case("mistral as shipped (sliding_window 32 on every layer)", "mistral", "config.json unchanged")
    hf_case("mistral, full attention", "mistral", "config.json: sliding_window set to null",
            cfg={"sliding_window": None})
    for mwl in (2, 1, 0):
        hf_case(f"qwen2.5, use_sliding_window true, sliding_window 32, max_window_layers {mwl}", "qwen2.5",
                f"config.json: use_sliding_window true, sliding_window 32, max_window_layers {mwl} (transformers "
                "Qwen2Config: layer i slides iff use_sliding_window and i >= max_window_layers)",
                cfg={"use_sliding_window": True, "sliding_window": 32, "max_window_layers": mwl})
    hf_case("qwen2.5 as shipped (bos_token null: no BOS)", "qwen2.5", "tokenizer_config.json unchanged")
    hf_case("qwen2.5 with a BOS", "qwen2.5", "tokenizer_config.json: add_bos_token true, bos_token "
            "\"<|endoftext|>\" (id 2045)", tok={"add_bos_token": True, "bos_token": "<|endoftext|>"})
    hf_case("qwen2.5, add_bos_token true with bos_token null", "qwen2.5",
            "tokenizer_config.json: add_bos_token true (bos_token stays null): an error", tok={"add_bos_token": True})
    hf_case("gemma3-v5 (rope_parameters nested per layer type, layer_types)", "gemma3-v5",
            "config.json unchanged (transformers v5 form); equals the gemma3 folder (v4 form)")
    hf_case("gemma3 (v4 form: rope_theta, rope_scaling, rope_local_base_freq, sliding_window_pattern)", "gemma3",
            "config.json unchanged")
    gguf_case("gemma3-F32.gguf with sliding_window_pattern 3", "gemma3-F32.gguf",
              [("gemma3.attention.sliding_window_pattern", 4, 3)],
              "the HF layer pattern (sliding, sliding, full, sliding) written into the GGUF: llama.cpp's "
              "hf_faithful_rows; equals the gemma3 folder")
    yarn = [("llama.rope.scaling.type", 8, "yarn"), ("llama.rope.scaling.factor", 6, 4.0),
            ("llama.rope.scaling.original_context_length", 4, 256)]
    for af in (0.5, 1.0):
        for bf in (4.0, 32.0):
            ch = yarn + [("llama.rope.scaling.attn_factor", 6, af), ("llama.rope.scaling.yarn_beta_fast", 6, bf)]
            gguf_case(f"mistral-F32.gguf yarn factor 4, original_context_length 256, attn_factor {af}, "
                      f"yarn_beta_fast {bf}: llama.cpp", "mistral-F32.gguf", ch,
                      "llama.cpp semantics: freq_scale 1/4, ext_factor 1, corr dims from original_context_length "
                      "256, magnitude attn_factor * (1 + 0.1 ln 4); llama.cpp does not read "
                      "rope.scaling.yarn_beta_fast for arch llama (beta_fast 32 whatever the key says)")
            gguf_case(f"mistral-F32.gguf yarn factor 4, original_context_length 256, attn_factor {af}, "
                      f"yarn_beta_fast {bf}: key applied", "mistral-F32.gguf", ch,
                      "as llama.cpp, with rope.scaling.yarn_beta_fast applied as ggml's beta_fast (= llama.cpp "
                      "given --yarn-beta-fast with the key's value)", honour_yarn_keys=True)
    for bad in (0.0, float("nan")):
        gguf_case(f"mistral-F32.gguf yarn with attn_factor {bad}", "mistral-F32.gguf",
                  yarn + [("llama.rope.scaling.attn_factor", 6, bad)], "an error: attn_factor must be finite, > 0")
    return out


def reference(shared, out_path, N, only=None):
    """Write arch_ref.json; with `only` (fixture labels and/or 'variants'), recompute just those entries of the
    existing file."""
    t_start = time.time()
    text = read_text(TEXT)
    arch = os.path.join(shared, "models", "arch")
    old = json.load(open(out_path)) if only and os.path.exists(out_path) else None

    def wanted(label):
        return not only or label in only
    out = old or dict(
        about="Expected values of posenc's eval on the architecture fixtures and the llama family, from the "
              "independent numpy oracle tests/oracle/arch_oracle.py (its docstring states the protocols: posenc "
              "windows and methods, llama-perplexity). Folders mean what transformers makes of them, GGUF files "
              "what llama.cpp makes of them. Forward in float32, exact activation functions (no llama.cpp fp16 "
              "GELU table), BF16 weights used as the exact values they are.",
        text=dict(file="data/text/tinystories_val_stories.txt", sha256=hashlib.sha256(open(TEXT, "rb").read())
                  .hexdigest()),
        token_hash="sha256 of the token ids written as little-endian int32",
        fixture_folder="POSENC_SHARED_DIR/models/arch (folders and GGUF files by name); llama-mini-rand in "
                       "POSENC_SHARED_DIR/models; stories260K in tests/data/models",
        N=N, methods="native at 64 and 256; native, none, linear, ntk, yarn at max(2048, 2 L0) (GPT-2: 512 = 2 "
                     "n_positions); llama_perplexity: ctx 64 / 128 / 256, 8 chunks",
        fixtures={}, bf16_equals_f32={}, variants=None)
    for name in ARCH_FOLDERS:
        for label, loader in ((name, lambda: load_hf(os.path.join(arch, name))),
                              (f"{name}-F32.gguf", lambda: load_gguf(os.path.join(arch, f"{name}-F32.gguf")))):
            if not wanted(label):
                continue
            t0 = time.time()
            m = loader()
            out["fixtures"][label] = fixture_entry(m, label, text, N)
            print(f"{label}: {time.time() - t0:.0f}s", flush=True)
        if not wanted(f"{name}-BF16.gguf"):
            continue
        f32 = load_gguf(os.path.join(arch, f"{name}-F32.gguf"))
        b16 = load_gguf(os.path.join(arch, f"{name}-BF16.gguf"))
        st = posenc_stream(f32.tokenizer, text)
        a, b = posenc_eval(f32, st, 64, "native", 4096), posenc_eval(b16, st, 64, "native", 4096)
        out["bf16_equals_f32"][f"{name}-BF16.gguf"] = dict(ctx=64, N=4096, ppl_f32=a["ppl"], ppl_bf16=b["ppl"],
                                                           rel=rel(b["ppl"], a["ppl"]))
    tok512 = Tokenizer(read_llama2c_tokenizer(os.path.join(REPO, "data", "tok512.bin"), 512), 1,
                       "llama2.c tok512.bin (llama2.c encode), BOS 1")
    models = os.path.join(REPO, "tests", "data", "models")
    llama = [("stories260K-F32.gguf", lambda: load_gguf(os.path.join(models, "stories260K-F32.gguf")), True),
             ("stories260K-hf", lambda: load_hf(os.path.join(models, "stories260K-hf"), tokenizer=tok512), True),
             ("llama-mini-rand", lambda: load_hf(os.path.join(shared, "models", "llama-mini-rand")), False),
             ("llama-mini-rand-bf16.gguf", lambda: load_gguf(os.path.join(shared, "models",
                                                                          "llama-mini-rand-bf16.gguf")), False)]
    for label, loader, stories in llama:
        if not wanted(label):
            continue
        t0 = time.time()
        m = loader()
        if stories:
            m.tokenizer = tok512
            m.notes = m.notes + ["tokenized with tok512.bin (llama2.c encode), as tests/data/oracle_ppl.json; the "
                                 "GGUF's own vocabulary has every score 0"]
        m.name = label
        out["fixtures"][label] = fixture_entry(m, label, text, N)
        print(f"{label}: {time.time() - t0:.0f}s", flush=True)
    if wanted("variants"):
        out["variants"] = variants(shared, text)
    json.dump(out, open(out_path, "w"), indent=1, allow_nan=False, default=lambda o: None)
    print(f"wrote {out_path} ({os.path.getsize(out_path)} bytes, {time.time() - t_start:.0f}s)")


# ============================================================================================== command line
def shared_dir(a):
    d = a.shared or os.environ.get("POSENC_SHARED_DIR")
    if not d or not os.path.isdir(os.path.join(d, "models")):
        sys.exit("give the shared fixture folder (holding models/ and models/arch/) with --shared or "
                 "POSENC_SHARED_DIR")
    return d


POSITION_MAP_CASES = {
    # fixture: (N, [(ctx, map)]): parameters small enough that every map changes the scores inside the window
    "stories260K-hf": (2048, [(256, dict(kind="self-extend", group=2, window=32)),
                              (1024, dict(kind="self-extend", group=4, window=128)),
                              (1024, dict(kind="dca", chunk_size=384, local_size=32)),
                              (1024, dict(kind="dca", chunk_size=200, local_size=120)),
                              (1024, dict(kind="rerope", window=256)),
                              (1024, dict(kind="leaky-rerope", window=256, leak=2.0)),
                              (1024, dict(kind="sinks", sinks=4, window=252)),
                              (1024, dict(kind="lm-infinite", **{"global": 10, "window": 512}))]),
    "llama-mini-rand": (512, [(256, dict(kind="self-extend", group=2, window=32)),
                              (256, dict(kind="dca", chunk_size=96, local_size=16)),
                              (256, dict(kind="rerope", window=64)),
                              (256, dict(kind="leaky-rerope", window=64, leak=4.0)),
                              (256, dict(kind="sinks", sinks=4, window=60)),
                              (256, dict(kind="lm-infinite", **{"global": 4, "window": 64}))]),
}


def position_map_reference(shared, out_path):
    """The posenc-protocol references of the training-free position maps (POSITION_MAP_CASES) on stories260K
    (its Hugging Face folder with tok512.bin) and llama-mini-rand."""
    text = read_text(TEXT)
    tok512 = Tokenizer(read_llama2c_tokenizer(os.path.join(REPO, "data", "tok512.bin"), 512), 1, "llama2.c tok512.bin")
    out = dict(about="posenc eval (posenc protocol) under each training-free position map, from "
                     "tests/oracle/arch_oracle.py position-maps (position_map_plan's docstring defines the maps)",
               fixtures={})
    for label, (N, cases) in POSITION_MAP_CASES.items():
        if label == "stories260K-hf":
            m = load_hf(os.path.join(REPO, "tests", "data", "models", "stories260K-hf"), tokenizer=tok512)
        else:
            m = load_hf(os.path.join(shared, "models", label))
        stream = posenc_stream(m.tokenizer, text)
        rows = []
        for L, pm in cases:
            r = posenc_eval(m, stream, L, pm["kind"], N, pmap=pm)
            r["map"] = pm
            rows.append(r)
            print(label, json.dumps(r), flush=True)
        out["fixtures"][label] = dict(N=N, L0=m.L0, stream=stream_info(stream, N), rows=rows)
    json.dump(out, open(out_path, "w"), indent=1, allow_nan=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cmd", choices=["check", "reference", "eval", "position-maps", "protocols"])
    ap.add_argument("--shared", help="the shared fixture folder (POSENC_SHARED_DIR)")
    ap.add_argument("--json", help="check / eval: write the results here")
    ap.add_argument("--out", help="reference: output JSON")
    ap.add_argument("--only", nargs="+", help="check: only these arch_ppl.json fixtures; reference: recompute only "
                    "these entries (fixture labels, NAME-BF16.gguf, variants) of the existing --out file")
    ap.add_argument("--n", type=int, default=16384, help="posenc protocol N")
    ap.add_argument("--model", help="eval: a GGUF file or HF folder")
    ap.add_argument("--ctx", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--methods", nargs="+", default=["native"])
    ap.add_argument("--protocol", choices=["posenc", "llama-perplexity"], default="posenc")
    ap.add_argument("--ggml-numerics", action="store_true", help="eval: emulate llama.cpp's float details")
    a = ap.parse_args()
    if a.cmd == "check":
        out = dict(arch=check(shared_dir(a), None, a.only), formats=check_formats(shared_dir(a)))
        if a.json:
            json.dump(out, open(a.json, "w"), indent=1)
    elif a.cmd == "reference":
        reference(shared_dir(a), a.out, a.n, a.only)
    elif a.cmd == "position-maps":
        position_map_reference(shared_dir(a), a.out)
    elif a.cmd == "protocols":
        protocol_reference(a.out or os.path.join(REPO, "tests", "data", "protocol_ref.json"))
    else:
        m = load_gguf(a.model) if a.model.endswith(".gguf") else load_hf(a.model)
        m.numerics = "ggml" if a.ggml_numerics else "exact"
        text = read_text(TEXT)
        res = dict(model=m.describe(), rows=[])
        if a.protocol == "posenc":
            stream = posenc_stream(m.tokenizer, text)
            res["stream"] = stream_info(stream, a.n)
            for L in a.ctx:
                for meth in a.methods:
                    try:
                        r = posenc_eval(m, stream, L, meth, a.n)
                    except OracleError as e:
                        r = dict(ctx=L, method=meth, error=str(e))
                    print(json.dumps(r), flush=True)
                    res["rows"].append(r)
        else:
            toks = m.tokenizer.encode(text, bos=True)
            for C in a.ctx:
                r = llama_perplexity(m, toks, C)
                print(json.dumps(r), flush=True)
                res["rows"].append(r)
        if a.json:
            json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
