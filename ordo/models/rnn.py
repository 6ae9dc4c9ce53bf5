"""RNNsearch* (paper 003 Eq. 5): a bidirectional GRU encoder and a conditional-GRU decoder with MLP attention.

Decoder step (Zhang et al. 2017, Eq. 5, after Bahdanau et al. 2015 and Sennrich et al. 2017)::

    s~_t = GRU1(s_{t-1}, y_{t-1});  α_t = align(s~_t, h);  c_t = Σ_j α_tj h_j;  s_t = GRU2(s~_t, c_t)
    logits_t = W_o tanh(W_s s_t + W_y E[y_{t-1}] + W_c c_t)

The attention is a replaceable sub-block: it receives the decoder state, so a method (the distortion
models) can read and store the previous alignment there. The model follows the same ``Seq2SeqModel``
protocol as the Transformer, so training and search are shared.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ordo.data.batch import PAD_ID, Batch
from ordo.gemm import Linear
from ordo.models.dropout import dropout
from ordo.models.outputs import DecoderState, EncoderOutput, Seq2SeqOutput


class BiGRUEncoder(nn.Module):
    """h_j = [→h_j ; ←h_j] from a bidirectional GRU over the source embeddings."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD_ID)
        self.rnn = nn.GRU(embed_dim, hidden, batch_first=True, bidirectional=True)
        self.dropout = dropout

    def forward(self, batch: Batch) -> EncoderOutput:
        """States (B, S, 2H) of ``batch.src_tokens`` (B, S)."""
        x = dropout(self.embed(batch.src_tokens), self.dropout, self.training)  # (B, S, E)
        packed = pack_padded_sequence(x, batch.src_lengths.cpu(), batch_first=True, enforce_sorted=False)
        states, _ = self.rnn(packed)
        states, _ = pad_packed_sequence(states, batch_first=True, total_length=x.size(1))  # (B, S, 2H)
        return EncoderOutput(dropout(states, self.dropout, self.training), batch.src_pad_mask)


class MLPAttention(nn.Module):
    """α_tj = softmax_j(v · tanh(W s~_t + U h_j)) (Bahdanau et al. 2015, Eq. 6); U h is computed once."""

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int) -> None:
        super().__init__()
        self.query = Linear(query_dim, attn_dim, bias=False)
        self.key = Linear(key_dim, attn_dim)
        self.score = Linear(attn_dim, 1, bias=False)

    def init_state(self, encoder_out: EncoderOutput, state: DecoderState) -> None:
        """Store the projected keys U h (B, S, A) in ``state.fields``."""
        state.fields["src_attn_keys"] = self.key(encoder_out.states)

    def forward(self, query: torch.Tensor, state: DecoderState, prev_embedding: torch.Tensor | None = None) -> torch.Tensor:
        """Alignment α_t (B, S) of ``query`` s~_t (B, Q) over the encoder states, padding masked.

        ``state.fields["hidden"]`` still holds s_{t-1} and ``prev_embedding`` is E[y_{t-1}] (B, E); this
        attention reads neither, a replacement (the distortion models) may.
        """
        energy = self.score(torch.tanh(state.fields["src_attn_keys"] + self.query(query).unsqueeze(1))).squeeze(-1)
        return energy.masked_fill(state.encoder.pad_mask, float("-inf")).softmax(dim=-1)  # (B, S)


class ConditionalGRUDecoder(nn.Module):
    """The conditional GRU of RNNsearch* with a deep output layer."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden: int, context_dim: int, attention: MLPAttention,
                 dropout: float) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD_ID)
        self.init_hidden = Linear(context_dim, hidden)
        self.gru1 = nn.GRUCell(embed_dim, hidden)
        self.attention = attention
        self.gru2 = nn.GRUCell(context_dim, hidden)
        self.out_state = Linear(hidden, embed_dim)
        self.out_prev = Linear(embed_dim, embed_dim)
        self.out_context = Linear(context_dim, embed_dim)
        self.project = Linear(embed_dim, vocab_size)
        self.dropout = dropout

    def init_state(self, encoder_out: EncoderOutput) -> DecoderState:
        """s_0 = tanh(W_init · mean_j h_j), plus whatever the attention keeps."""
        keep = (~encoder_out.pad_mask).unsqueeze(-1).to(encoder_out.states.dtype)  # (B, S, 1)
        mean = (encoder_out.states * keep).sum(1) / keep.sum(1).clamp(min=1)  # (B, C)
        state = DecoderState(encoder_out, fields={"hidden": torch.tanh(self.init_hidden(mean))})
        self.attention.init_state(encoder_out, state)
        return state

    def step(self, prev_tokens: torch.Tensor, state: DecoderState) -> tuple[torch.Tensor, torch.Tensor]:
        """One step: the deep output t_t (B, E), which ``project`` turns into logits, and the alignment α_t
        (B, S); advances ``state``."""
        emb = dropout(self.embed(prev_tokens), self.dropout, self.training)  # (B, E)
        s_tilde = self.gru1(emb, state.fields["hidden"])  # (B, H)
        alpha = self.attention(s_tilde, state, emb)  # (B, S)
        context = torch.bmm(alpha.unsqueeze(1), state.encoder.states).squeeze(1)  # (B, C)
        hidden = self.gru2(context, s_tilde)  # (B, H)
        state.fields["hidden"] = hidden
        state.step += 1
        deep = torch.tanh(self.out_state(hidden) + self.out_prev(emb) + self.out_context(context))  # (B, E)
        return dropout(deep, self.dropout, self.training), alpha


class RNNSearchModel(nn.Module):
    """RNNsearch* following the ``Seq2SeqModel`` protocol; ``forward`` also returns the alignments."""

    def __init__(self, encoder: BiGRUEncoder, decoder: ConditionalGRUDecoder) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.max_output_tokens: int | None = None  # recurrent: no position table

    def forward(self, batch: Batch) -> Seq2SeqOutput:
        """Teacher-forced deep outputs (B, T, E) with the output layer, and ``extras["alignment"]`` (B, T, S)."""
        assert batch.tgt_in is not None
        state = self.init_state(self.encode(batch))
        deep, alignments = zip(*(self.decoder.step(batch.tgt_in[:, t], state) for t in range(batch.tgt_in.size(1))))
        return Seq2SeqOutput(torch.stack(deep, 1), self.decoder.project, {"alignment": torch.stack(alignments, 1)})

    def encode(self, batch: Batch) -> EncoderOutput:
        """Bidirectional GRU states."""
        return self.encoder(batch)

    def init_state(self, encoder_out: EncoderOutput) -> DecoderState:
        """Initial decoder hidden state and attention keys."""
        return self.decoder.init_state(encoder_out)

    def decode_step(self, prev_tokens: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Logits (B, V) of the next token."""
        return self.decoder.project(self.decoder.step(prev_tokens, state)[0])  # type: ignore[no-any-return]
