"""NeMo's Lhotse dataloader entry point, read by sharc (docs/python.md, "NeMo configs").

``get_lhotse_dataloader_from_config(config, global_rank, world_size, dataset, tokenizer)``
takes a NeMo ``train_ds`` block (a dict, an OmegaConf ``DictConfig``, or a whole model
config holding ``model.train_ds``) with NeMo's key names and defaults, and returns an
iterable with ``state_dict``/``load_state_dict`` whose batches are those of NeMo's ASR
dataset: ``(audio, audio_lens, tokens, token_lens)`` torch tensors with a tokenizer, a dict
of the same fields by name without one. A key sharc does not know, or a value it cannot
honour, raises ``ValueError`` naming the key and what to do; nothing is silently ignored.
``reader_settings()`` is the translation alone: the ``sharc.Reader`` arguments of a config.
"""
from __future__ import annotations

import math
import numbers
import os
import secrets
import sys
import tempfile
import warnings
from typing import Any, Dict, List, Optional, Tuple

import sharc

__all__ = ["get_lhotse_dataloader_from_config", "reader_settings", "NemoDataLoader", "NEMO_DEFAULTS"]

_INF = float("inf")

# NeMo's LhotseDataLoadingConfig: every key with NeMo's default (its dataclass is the source
# of truth for NeMo's defaults), plus fault_tolerant_audio_loading and
# use_stateful_dataloader of newer NeMo (NVIDIA-NeMo/Speech).
NEMO_DEFAULTS: Dict[str, Any] = {
    "input_cfg": None, "manifest_filepath": None, "tarred_audio_filepaths": None, "cuts_path": None,
    "shar_path": None, "skip_missing_manifest_entries": False, "tarred_random_access": False,
    "batch_size": None, "batch_duration": None, "quadratic_duration": None, "use_bucketing": False,
    "bucket_batch_size": None, "num_buckets": 30, "num_cuts_for_bins_estimate": 10000,
    "bucket_duration_bins": None, "bucket_buffer_size": 10000, "concurrent_bucketing": True,
    "bucketing_2d_strict_mode": True, "shuffle_buffer_size": 10000, "drop_last": False,
    "shard_seed": "trng", "max_open_streams": None, "cuda_expandable_segments": True,
    "multi_config": False, "sampler_fusion": "round_robin", "sampler_weights": None,
    "pretokenize": True, "prompt_format": None, "use_multimodal_sampling": False,
    "token_equivalent_duration": None, "batch_tokens": None, "quadratic_factor": None,
    "min_duration": -1, "max_duration": _INF, "min_tps": -1, "max_tps": _INF, "min_tokens": None,
    "max_tokens": None, "measure_total_length": True, "min_tpt": -1, "max_tpt": _INF,
    "shuffle": False, "sample_rate": 16000, "seed": 0, "num_workers": 0, "pin_memory": False,
    "channel_selector": None, "noise_path": None, "noise_snr": [10.0, 20.0], "noise_mix_prob": 0.5,
    "perturb_speed": False, "concatenate_samples": False, "concatenate_gap_seconds": 0.1,
    "concatenate_duration_factor": 1.0, "concatenate_merge_supervisions": True, "db_norm": -25.0,
    "truncate_duration": None, "truncate_offset_type": "random", "cut_into_windows_duration": None,
    "cut_into_windows_hop": None, "keep_excessive_supervisions": True, "rir_enabled": False,
    "rir_path": None, "rir_prob": 0.5, "pad_min_duration": None, "pad_direction": "right",
    "text_field": "text", "lang_field": "lang", "metadata_only": False, "force_finite": False,
    "force_map_dataset": False, "force_iterable_dataset": False, "random_padding": None,
    "fault_tolerant_audio_loading": True, "use_stateful_dataloader": False,
}

# Keys of NeMo's older (non-Lhotse) dataset configs, found in train_ds blocks such as the
# FastConformer examples: NeMo's Lhotse loader warns that it ignores them, and so does sharc.
LEGACY_KEYS = ("use_lhotse", "is_tarred", "shuffle_n", "bucketing_strategy", "bucketing_batch_size",
               "bucketing_weights", "tarred_shard_strategy", "shard_strategy", "use_start_end_token",
               "trim_silence", "max_utts", "labels", "return_sample_id", "parser", "normalize",
               "defer_setup", "shard_manifests", "global_rank", "world_size")

# Keys whose effect sharc does not have, accepted only at the value that turns that effect
# off (NeMo's default): key -> what to do instead.
_ONLY_OFF = {
    "cuts_path": "convert the CutSet to Lhotse Shar (lhotse shar export) or use `sharc pack`, then give shar_path",
    "skip_missing_manifest_entries": "repack the shards so that every member has a manifest row",
    "tarred_random_access": "repack the shards so that every member has a manifest row",
    "multi_config": "read each sub-config with its own loader",
    "sampler_weights": "read each sub-config with its own loader",
    "prompt_format": "apply the prompt to the batches' text in the model",
    "concatenate_samples": "remove it: sharc does not concatenate cuts",
    "truncate_duration": "remove it: sharc does not truncate cuts",
    "cut_into_windows_duration": "remove it: sharc does not window cuts",
    "rir_enabled": "remove it: sharc has no reverberation",
    "rir_path": "remove it: sharc has no reverberation",
    "pad_min_duration": "remove it: sharc pads batches, not cuts",
    "metadata_only": "read the manifests for metadata with `sharc buckets` or `sharc validate`",
    "random_padding": "remove it: sharc does not pad cuts randomly",
}
# min_tpt/max_tpt (text datasets), pretokenize and bucketing_2d_strict_mode: accepted only
# at the value sharc implements.
_ONLY_VALUE = {
    "min_tpt": (-1, "sharc reads audio datasets only: remove it"),
    "max_tpt": (_INF, "sharc reads audio datasets only: remove it"),
    "pretokenize": (True, "sharc tokenizes while sampling (2D buckets, token filters): remove it"),
    "bucketing_2d_strict_mode": (True, "sharc implements the strict mode only: remove it"),
    "sampler_fusion": ("round_robin", "read each sub-config with its own loader"),
}
# Accepted and without effect in sharc (docs/python.md says why for each).
_NO_EFFECT = ("concurrent_bucketing", "cuda_expandable_segments", "pin_memory", "concatenate_gap_seconds", "concatenate_duration_factor",
              "concatenate_merge_supervisions", "db_norm", "truncate_offset_type", "cut_into_windows_hop",
              "keep_excessive_supervisions", "rir_prob", "pad_direction", "force_map_dataset",
              "force_iterable_dataset", "use_stateful_dataloader")


def _plain(value: Any) -> Any:
    """Plain dicts, lists and scalars from a config: an OmegaConf container through
    ``OmegaConf.to_container(resolve=True)`` when omegaconf is importable, and any mapping or
    sequence by duck typing otherwise."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, (DictConfig, ListConfig)):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:
        pass
    if isinstance(value, (str, bytes, os.PathLike)) or value is None:
        return value
    if hasattr(value, "keys") and hasattr(value, "__getitem__"):
        return {str(k): _plain(value[k]) for k in value.keys()}
    if isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and hasattr(value, "__len__")):
        return [_plain(v) for v in value]
    return value


def _train_ds(config: Any) -> Dict[str, Any]:
    cfg = _plain(config)
    if not isinstance(cfg, dict):
        raise TypeError(f"sharc.nemo: config must be a dict or DictConfig (a train_ds block), not "
                        f"{type(config).__name__}")
    if "model" in cfg and isinstance(cfg["model"], dict) and "train_ds" in cfg["model"]:
        cfg = cfg["model"]["train_ds"]
    elif "train_ds" in cfg and isinstance(cfg["train_ds"], dict):
        cfg = cfg["train_ds"]
    return cfg


def _fail(key: str, value: Any, what: str) -> ValueError:
    return ValueError(f"sharc.nemo: config key {key!r} = {value!r} is not supported: {what}")


# The strings OmegaConf's BooleanNode reads as true and as false.
_TRUE, _FALSE = ("true", "yes", "on", "y"), ("false", "no", "off", "n")


def _typed(key: str, value: Any, kind: type) -> Any:
    """``value`` of config key ``key`` as ``kind`` (int, float or bool), converted as OmegaConf
    converts it for NeMo's typed LhotseDataLoadingConfig: an int from an int or a numeric str
    (never a float: 4.5 is no batch size), a float from a number or a numeric str, a bool from a
    bool, an int or "true"/"false" (never from any str, which bool() would make True).
    Otherwise a ValueError naming the key."""
    if kind is bool:
        if isinstance(value, int):  # bool, and an int as OmegaConf's BooleanNode takes it
            return bool(value)
        if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
            return value.lower() in _TRUE
        raise _fail(key, value, "give true or false")
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            pass
    elif not isinstance(value, bool) and isinstance(value, numbers.Integral if kind is int else numbers.Real):
        return kind(value)
    raise _fail(key, value, "give an integer" if kind is int else "give a number")


def _typed_list(key: str, value: Any, kind: type, what: str, length: Optional[int] = None) -> List[Any]:
    """A list config value of ``kind`` items (``length`` of them when given)."""
    if not isinstance(value, list) or (length is not None and len(value) != length):
        raise _fail(key, value, what)
    try:
        return [_typed(key, x, kind) for x in value]
    except ValueError:
        raise _fail(key, value, what) from None


def _check_keys(cfg: Dict[str, Any]) -> None:
    # use_lhotse: true is what selects this loader in NeMo; its other keys are only listed.
    legacy = [k for k in cfg if k in LEGACY_KEYS and not (k == "use_lhotse" and cfg[k] is True)]
    for key, value in cfg.items():
        if key in LEGACY_KEYS:
            continue
        if key not in NEMO_DEFAULTS:
            raise ValueError(f"sharc.nemo: unknown config key {key!r}: not a key of NeMo's "
                             "LhotseDataLoadingConfig that sharc knows (docs/python.md, \"NeMo configs\", "
                             "lists them); remove it or correct its spelling")
        if key in _ONLY_OFF and value not in (None, False):
            raise _fail(key, value, _ONLY_OFF[key])
        if key in _ONLY_VALUE and value != _ONLY_VALUE[key][0]:
            raise _fail(key, value, _ONLY_VALUE[key][1])
    if legacy:
        warnings.warn(f"sharc.nemo: config keys {', '.join(legacy)} belong to NeMo's non-Lhotse datasets; "
                      "NeMo's Lhotse loader ignores them, and so does sharc", UserWarning,
                      stacklevel=_caller_level())


def _caller_level() -> int:
    """The stacklevel of warnings.warn, called here, that names the first line outside the
    sharc package (the user's call, however deep in the package the config was read)."""
    here = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == here:
        frame, level = frame.f_back, level + 1
    return level


def _shared_random_seed() -> Optional[int]:
    """A true random number drawn on rank 0 and broadcast to every rank, when
    torch.distributed is initialized; None otherwise."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if not (dist.is_available() and dist.is_initialized()):
        return None
    box = [secrets.randbelow(2**32) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return int(box[0])


def _resolve_seed(key: str, value: Any, world_size: int, base: Optional[int] = None) -> int:
    """NeMo's seeds: an integer as is; "trng" a true random number (every run differs);
    "randomized" the config's ``seed``. sharc splits shards across data-parallel ranks by
    one seeded order, so every rank must resolve the same number: with world_size > 1,
    "trng" is drawn on rank 0 and broadcast over torch.distributed (NeMo draws one per
    rank), and refused when torch.distributed is not initialized."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _fail(key, value, "give an integer, \"randomized\" or \"trng\"")
    if isinstance(value, int):
        return value
    if value == "randomized" and base is not None:
        return base
    if value == "trng":
        if world_size > 1:
            shared = _shared_random_seed()
            if shared is not None:
                return shared
            fix = ("set shard_seed to \"randomized\" (seeded by the config's seed) or an integer"
                   if key == "shard_seed" else "set seed to an integer")
            raise _fail(key, value, "a true random seed differs on every rank, and sharc splits the shards "
                                    f"across ranks by one seeded order: {fix}")
        return secrets.randbelow(2**32)
    raise _fail(key, value, "give an integer, \"randomized\" or \"trng\"")


def _weighted(entries: Any, key: str) -> List[Tuple[Any, Optional[float]]]:
    """NeMo's list forms: ``[path, ...]``, ``[[path], ...]`` or ``[[path, weight], ...]``."""
    if len(entries) == 0:
        raise _fail(key, entries, "give at least one path")
    out = []
    for e in entries:
        if isinstance(e, list):
            if len(e) not in (1, 2):
                raise _fail(key, entries, "give [path] or [path, weight] entries")
            out.append((e[0], float(e[1]) if len(e) == 2 else None))
        else:
            out.append((e, None))
    return out


def _sources(cfg: Dict[str, Any]) -> Tuple[List[Any], Dict[str, Any]]:
    """The paths, or an inline input_cfg, of the data keys."""
    given = [k for k in ("input_cfg", "shar_path", "manifest_filepath") if cfg.get(k) is not None]
    if len(given) != 1:
        raise ValueError("sharc.nemo: give exactly one of input_cfg, shar_path, or manifest_filepath with "
                         f"tarred_audio_filepaths (got {', '.join(given) if given else 'none'})")
    if given[0] == "input_cfg":
        if cfg.get("tarred_audio_filepaths") is not None:
            raise _fail("tarred_audio_filepaths", cfg["tarred_audio_filepaths"], "it goes with manifest_filepath")
        return [], {"input_cfg": cfg["input_cfg"]}
    if given[0] == "shar_path":
        shar = cfg["shar_path"]
        if isinstance(shar, dict):  # NeMo's explicit fields: {"cuts": [...], "recording": [...]}
            raise _fail("shar_path", shar, "sharc reads Shar directories (or patterns): give the directory "
                                           "that holds these files, or a list of [path, weight]")
        if not isinstance(shar, list):
            return [shar], {}
        entries = _weighted(shar, "shar_path")
        if all(w is None for _, w in entries):
            return [p for p, _ in entries], {}
        if any(w is None for _, w in entries):
            raise _fail("shar_path", shar, "give a weight to every entry or to none")
        return [], {"input_cfg": [{"type": "lhotse_shar", "shar_path": p, "weight": w} for p, w in entries]}
    manifests, tars = cfg["manifest_filepath"], cfg.get("tarred_audio_filepaths")
    if tars is None:
        raise _fail("manifest_filepath", manifests, "sharc reads NeMo tarred datasets: give tarred_audio_filepaths "
                                                    "too (non-tarred manifests: pack them with `sharc pack`)")
    if not isinstance(manifests, list):
        if isinstance(tars, list):
            raise _fail("tarred_audio_filepaths", tars, "give one pattern with a manifest_filepath string")
        return [tars, manifests], {}
    m, t = _weighted(manifests, "manifest_filepath"), _weighted(tars, "tarred_audio_filepaths")
    if len(m) != len(t):
        raise _fail("tarred_audio_filepaths", tars, f"give one entry per manifest_filepath entry ({len(m)})")
    if any(w is None for _, w in m) and any(w is not None for _, w in m):
        raise _fail("manifest_filepath", manifests, "give a weight to every entry or to none")
    entries = []
    for (mp, w), (tp, _) in zip(m, t):
        entry = {"type": "nemo_tarred", "manifest_filepath": mp, "tarred_audio_filepaths": tp}
        if w is not None:
            entry["weight"] = w
        entries.append(entry)
    return [], {"input_cfg": entries}


def _multimodal(cfg: Dict[str, Any], fixed_sizes: bool) -> Dict[str, Any]:
    """NeMo's MultimodalSamplingConstraint: cuts measured in audio tokens of
    token_equivalent_duration seconds, batch_tokens per batch, quadratic_factor."""
    s: Dict[str, Any] = {}
    if cfg.get("token_equivalent_duration") is None:
        raise _fail("use_multimodal_sampling", True, "give token_equivalent_duration too")
    if _typed("measure_total_length", cfg.get("measure_total_length", True), bool) and not fixed_sizes:
        raise _fail("measure_total_length", cfg.get("measure_total_length", True),
                    "sharc measures a cut in audio tokens only: set measure_total_length: false")
    s["token_equivalent_duration"] = _typed("token_equivalent_duration", cfg["token_equivalent_duration"], float)
    if cfg.get("batch_tokens") is not None:
        s["batch_tokens"] = _typed("batch_tokens", cfg["batch_tokens"], int)
    if cfg.get("quadratic_factor") is not None:
        s["quadratic_duration"] = _typed("quadratic_factor", cfg["quadratic_factor"], float)
    return s


def _noise(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """NeMo's noise mixing (CutSet.mix): noise_path as sharc.Reader's noise paths."""
    path = cfg.get("noise_path")
    if path is None:
        return {}
    if isinstance(path, dict):
        if path.get("shar_path") is not None:
            path = path["shar_path"]
        elif path.get("manifest_filepath") is not None and path.get("tarred_audio_filepaths") is not None:
            path = [path["tarred_audio_filepaths"], path["manifest_filepath"]]
        else:
            raise _fail("noise_path", path, "give a path sharc reads, or a dict with shar_path, or with "
                                            "manifest_filepath and tarred_audio_filepaths")
    s = {"noise": path, "noise_prob": _typed("noise_mix_prob", cfg.get("noise_mix_prob", 0.5), float)}
    snr = cfg.get("noise_snr", [10.0, 20.0])
    s["noise_snr"] = _typed_list("noise_snr", snr, float, "give [low, high] in dB", 2)
    return s


def _batching(cfg: Dict[str, Any], tokenized: bool) -> Dict[str, Any]:
    s: Dict[str, Any] = {}
    bins, bbs = cfg.get("bucket_duration_bins"), cfg.get("bucket_batch_size")
    # Newer NeMo turns bucketing on when bins or batch sizes are given, rather than ignore them.
    bucketing = _typed("use_bucketing", cfg.get("use_bucketing", False), bool)
    bucketing = bucketing or bins is not None or bbs is not None
    if bbs is not None:
        # NeMo's FixedBucketBatchSizeConstraint2D: the sizes replace batch_duration/batch_size.
        if bins is None:
            raise _fail("bucket_batch_size", bbs, "give bucket_duration_bins too (one bin per batch size)")
        s["bucket_batch_size"] = _typed_list("bucket_batch_size", bbs, int, "give a list of integers")
    else:
        if cfg.get("batch_duration") is not None:
            s["batch_duration"] = _typed("batch_duration", cfg["batch_duration"], float)
        if cfg.get("batch_size") is not None:
            s["max_cuts"] = _typed("batch_size", cfg["batch_size"], int)
        if not s:
            raise ValueError("sharc.nemo: the config sets no batch size: give batch_duration, batch_size, or "
                             "bucket_duration_bins with bucket_batch_size")
    multimodal = _typed("use_multimodal_sampling", cfg.get("use_multimodal_sampling", False), bool)
    if multimodal:
        s.update(_multimodal(cfg, "bucket_batch_size" in s))
    elif cfg.get("quadratic_duration") is not None:
        s["quadratic_duration"] = _typed("quadratic_duration", cfg["quadratic_duration"], float)
    max_cut = cfg.get("max_duration", _INF)
    if max_cut is not None and math.isfinite(_typed("max_duration", max_cut, float)):
        s["max_cut_duration"] = _typed("max_duration", max_cut, float)
    if cfg.get("min_duration") is not None and _typed("min_duration", cfg["min_duration"], float) > 0:
        s["min_duration"] = _typed("min_duration", cfg["min_duration"], float)
    if bucketing:
        s["num_buckets"] = _typed("num_buckets", cfg.get("num_buckets", 30), int)
        estimate = cfg.get("num_cuts_for_bins_estimate", 10000)
        s["num_cuts_for_bins"] = _typed("num_cuts_for_bins_estimate", estimate, int)
        s["buffer_size"] = _typed("bucket_buffer_size", cfg.get("bucket_buffer_size", 10000), int)
        if bins is not None:
            s["bins"] = bins
        elif "max_cut_duration" in s:
            s["bins"] = "linspace"  # NeMo's determine_bucket_duration_bins
    else:
        # NeMo's DynamicCutSampler: one bucket, shuffled within shuffle_buffer_size cuts.
        s["num_buckets"] = 1
        if cfg.get("shuffle_buffer_size") is not None:
            s["buffer_size"] = _typed("shuffle_buffer_size", cfg["shuffle_buffer_size"], int)
    for key in ("token_equivalent_duration", "batch_tokens", "quadratic_factor"):
        if cfg.get(key) is not None and not multimodal:
            raise _fail(key, cfg[key], "it applies with use_multimodal_sampling: true")
    for key in ("min_tps", "max_tps", "min_tokens", "max_tokens"):
        value = cfg.get(key)
        off = value is None or (key == "min_tps" and value <= 0) or (key == "max_tps" and value == _INF)
        if not off:
            if not tokenized:
                raise _fail(key, value, "token filters count tokens: pass tokenizer=")
            s[key] = value
    return s


def reader_settings(config: Any, global_rank: int = 0, world_size: int = 1,
                    tokenizer: Any = None) -> Tuple[List[Any], Dict[str, Any]]:
    """The ``sharc.Reader(paths, **settings)`` arguments of a NeMo ``train_ds`` config, with
    NeMo's defaults for the keys it leaves out. ``tokenizer`` is a ``sharc.Reader``
    tokenizer value (a model path or a dict {lang: path}), or None. Raises ``ValueError``
    naming a key sharc does not know or cannot honour."""
    cfg = _train_ds(config)
    _check_keys(cfg)
    get = lambda key: cfg.get(key, NEMO_DEFAULTS[key])  # noqa: E731
    paths, s = _sources(cfg)
    s.update(_batching(cfg, tokenizer is not None))
    if tokenizer is not None:
        s["tokenizer"] = tokenizer
    seed = _resolve_seed("seed", get("seed"), world_size)
    s["seed"] = _resolve_seed("shard_seed", get("shard_seed"), world_size, base=seed)
    s["shuffle"] = s["shuffle_shards"] = _typed("shuffle", get("shuffle"), bool)
    s["drop_last"] = _typed("drop_last", get("drop_last"), bool)
    s["dp_rank"], s["dp_size"] = int(global_rank), int(world_size)
    s["sampling_rate"], s["resample"] = _typed("sample_rate", get("sample_rate"), int), True
    if "input_cfg" in s:
        s["mix_finite"] = _typed("force_finite", get("force_finite"), bool)
        if get("max_open_streams") is not None:
            s["max_open_streams"] = _typed("max_open_streams", get("max_open_streams"), int)
    else:
        if get("max_open_streams") is not None:
            raise _fail("max_open_streams", get("max_open_streams"), "it applies to an input_cfg mixture only")
        # Finite: one epoch per iteration (epochs unset), so that the loader is iterated again
        # at every validation, as NeMo's is; else one endless iteration.
        if not _typed("force_finite", get("force_finite"), bool):
            s["epochs"] = 0
    if get("num_workers"):
        s["threads"] = _typed("num_workers", get("num_workers"), int)
    channel = get("channel_selector")
    if channel is not None:
        if isinstance(channel, bool) or not isinstance(channel, int):
            raise _fail("channel_selector", channel, "give a channel index (sharc selects one channel)")
        s["channel"] = channel
    s.update(_noise(cfg))
    if _typed("perturb_speed", get("perturb_speed"), bool):
        s["speed_perturb"] = [0.9, 1.0, 1.1]  # NeMo's mux of the cuts at 1.0, 0.9 and 1.1
    tolerant = _typed("fault_tolerant_audio_loading", get("fault_tolerant_audio_loading"), bool)
    s["on_error"] = "skip" if tolerant else "fail"
    for key in ("text_field", "lang_field"):
        if get(key) != NEMO_DEFAULTS[key]:
            s["nemo_" + key] = get(key)
    return paths, s


def _model_file(tok: Any, where: str, tmp: List[Any]) -> str:
    """A SentencePiece model path from a path, a SentencePieceProcessor (its serialized
    model, written to a temporary file), or a NeMo tokenizer (its ``model_path``, or its
    ``.tokenizer`` processor)."""
    if isinstance(tok, (str, os.PathLike)):
        return os.fspath(tok)
    if hasattr(tok, "serialized_model_proto"):
        if not tmp:
            tmp.append(tempfile.TemporaryDirectory(prefix="sharc-spm-"))
        path = os.path.join(tmp[0].name, f"{len(os.listdir(tmp[0].name))}.model")
        with open(path, "wb") as f:
            f.write(tok.serialized_model_proto())
        return path
    if isinstance(getattr(tok, "model_path", None), (str, os.PathLike)):
        return os.fspath(tok.model_path)
    if getattr(tok, "tokenizer", None) is not None and tok.tokenizer is not tok:
        return _model_file(tok.tokenizer, where, tmp)
    raise TypeError(f"sharc.nemo: {where} {type(tok).__name__} is not a tokenizer sharc can read: give a "
                    "SentencePiece .model path, a sentencepiece.SentencePieceProcessor, a NeMo "
                    "SentencePieceTokenizer or AggregateTokenizer, or a dict {lang: one of those}")


def _tokenizer_models(tok: Any, tmp: List[Any]) -> Any:
    while getattr(tok, "_tokenizer", None) is not None:  # NeMo's TokenizerWrapper, as datasets hold it
        tok = tok._tokenizer
    if tok is None:
        return None
    langs = getattr(tok, "tokenizers_dict", None)  # NeMo's AggregateTokenizer
    if langs is None and isinstance(tok, dict):
        langs = tok
    if langs is not None:
        return {str(k): _model_file(v, f"tokenizer[{k!r}]", tmp) for k, v in langs.items()}
    return _model_file(tok, "tokenizer", tmp)


class NemoDataLoader:
    """Iterates NeMo ASR batches from a ``sharc.Reader``: ``(audio, audio_lens, tokens,
    token_lens)`` with a tokenizer (float32 ``[B, T]``, int32 ``[B]``, int64 ``[B, L]``
    padded with 0, int64 ``[B]``, as NeMo's ``LhotseSpeechToTextBpeDataset`` collates
    them), else a dict of torch tensors and string lists by name. ``state_dict`` /
    ``load_state_dict`` are the reader's; ``reader`` is the reader itself."""

    def __init__(self, paths: List[Any], settings: Dict[str, Any], temporaries: List[Any]):
        import torch

        self._torch = torch
        self._temporaries = temporaries  # model files written for the reader, kept while it lives
        self._tokens = "tokenizer" in settings
        self.reader = sharc.Reader(paths, **settings)

    def _convert(self, batch: "sharc.Batch") -> Any:
        torch = self._torch
        if self._tokens:
            return (torch.from_dlpack(batch["audio"]), torch.from_dlpack(batch["audio_lens"]),
                    torch.from_dlpack(batch["tokens"]).long(), torch.from_dlpack(batch["token_lens"]).long())
        return {k: (v if isinstance(v, list) else torch.from_dlpack(v)) for k, v in batch.items()}

    def __iter__(self):
        for batch in self.reader:
            yield self._convert(batch)

    def state_dict(self) -> Dict[str, Any]:
        return self.reader.state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.reader.load_state_dict(state)

    def close(self) -> None:
        self.reader.close()


def get_lhotse_dataloader_from_config(config: Any, global_rank: int, world_size: int, dataset: Any = None,
                                      tokenizer: Any = None, **settings: Any) -> NemoDataLoader:
    """NeMo's ``get_lhotse_dataloader_from_config`` on sharc: a :class:`NemoDataLoader`
    over ``config`` (a ``train_ds`` block as a dict or ``DictConfig``, or a model config
    holding one). ``global_rank``/``world_size`` are the data-parallel slot (sharc's
    ``dp_rank``/``dp_size``: each reads its own share of the shards). ``tokenizer``: a
    SentencePiece ``.model`` path, a ``SentencePieceProcessor``, a NeMo
    ``SentencePieceTokenizer`` or ``AggregateTokenizer``, or a dict {lang: one of those}.
    ``dataset``: None or NeMo's ``LhotseSpeechToTextBpeDataset``, whose batches sharc
    collates itself (its tokenizer is used when ``tokenizer`` is None). Extra keyword
    ``settings`` are ``sharc.Reader`` keywords that override the config's (``threads``,
    ``device``, ...)."""
    if dataset is not None:
        name = type(dataset).__name__
        if name != "LhotseSpeechToTextBpeDataset":
            raise TypeError(f"sharc.nemo: dataset {name} is not supported: sharc collates the batches of "
                            "NeMo's LhotseSpeechToTextBpeDataset (audio, audio_lens, tokens, token_lens); "
                            "pass dataset=None and build other batches from those")
        if getattr(dataset, "return_cuts", False):
            raise ValueError("sharc.nemo: dataset.return_cuts is not supported: sharc batches carry cut_id, "
                             "text and language by name instead of Lhotse cuts (leave tokenizer unset)")
        if tokenizer is None:
            tokenizer = getattr(dataset, "tokenizer", None)
    temporaries: List[Any] = []
    models = _tokenizer_models(tokenizer, temporaries)
    paths, s = reader_settings(config, global_rank, world_size, models)
    s.update(settings)
    return NemoDataLoader(paths, s, temporaries)
