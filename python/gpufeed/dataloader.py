"""gpufeed.DataLoader: torch.utils.data.DataLoader's face on gpufeed's engine.

A script switches by changing `torch.utils.data.DataLoader(` to
`gpufeed.DataLoader(`. The data set must be a torchvision ImageFolder or
DatasetFolder (or a Subset of one): its own `samples` are the data set, so
indices and targets are torchvision's. Its transform is translated when it
is a composition of what gpufeed does in C (SUPPORTED below); anything else
raises gpufeed.Unsupported naming it, never a silent difference.

Each `for` over the loader is one epoch: the sampler (the one given, or the
RandomSampler / SequentialSampler DataLoader would make) draws the epoch's
indices exactly as DataLoader does, from torch's generator, and gpufeed
decodes exactly those, in that order, in batches of `batch_size`.

Where it differs, on purpose:
  * num_workers is the number of decode threads (0 means one); no worker
    processes are started, so worker_init_fn and a timeout are refused.
  * images are zero-copy views of gpufeed's batch memory; the memory
    returns to gpufeed when the tensors are gone. Keep a `.clone()` of what
    you keep for long; up to max_held_batches (16) batches may be held.
  * with PILToTensor (uint8), images are NCHW views of NHWC memory
    (non-contiguous; `.contiguous()` copies).
  * resampling is gpufeed's own: bilinear and bicubic pixels are within 1
    of PIL's, nearest equal to them; crop boxes follow torchvision's
    distributions, drawn from gpufeed's own generator (below), as do the
    augmentations' parameters (TrivialAugmentWide, RandAugment,
    AutoAugment, ColorJitter, RandomErasing: their ops' pixels are
    torchvision's over PIL, exactly).
  * a collate_fn other than default_collate runs in this process, on the
    list of (image, target) samples DataLoader would give it (the images
    views into the batch); gpufeed.MixUpCutMix as the collate_fn runs in C
    instead, in place.
  * bad images raise gpufeed.SampleError naming the file, as PIL would
    raise; images PIL opens with a warning are decoded.
  * TIFF (.tif, .tiff: in torchvision's IMG_EXTENSIONS) is not decoded: a
    data set with such samples is refused at construction (Unsupported,
    naming the first and how many).
  * torch's global generator: gpufeed draws its random crops and flips
    from a generator of its own, seeded as DataLoader seeds its workers,
    so its crop boxes are not the ones torchvision would have drawn. The
    global generator's state (torch.get_rng_state()) is DataLoader's
    after every batch, though, so shuffled orders, dropout and anything
    else drawn from it in later epochs are the same: every iterator draws
    the base seed and the sampler's seed as DataLoader's does (not the
    base seed again with persistent_workers); with num_workers=0, where
    torch's transforms draw from the global generator in the main
    process, each batch, when it is handed out, makes the draws its
    samples' transforms would have made there, in the same order:
    RandomResizedCrop.get_params on a stand-in of each image's size (its
    header, read once per file with PIL, as torchvision sees it: the
    number of draws depends on the size) and RandomHorizontalFlip's
    torch.rand(1). With num_workers > 0 torch's transforms run in the
    workers and the main process draws nothing per sample: nor does
    gpufeed. (With num_workers=0 DataLoader draws the sampler's seed at
    the first next(), gpufeed at iter(): the same within a `for`.)
  * the order is the sampler's alone (handed over with gf_set_order), so
    gpufeed.Loader's `order=`/`shard_window=` (the shard-aware order for tar
    shards) have no place here: DataLoader takes no such keyword (a
    TypeError), and its ImageFolder data is never tar shards anyway.
"""
import array
import os
import sys
import weakref

from . import _gpufeed

SUPPORTED = ("RandomResizedCrop(size, scale, ratio, interpolation) [bilinear|bicubic|nearest]",
             "RandomHorizontalFlip(p)",
             "Resize(int, interpolation) + CenterCrop(size) [bilinear|bicubic|nearest]",
             "then TrivialAugmentWide, RandAugment, AutoAugment(IMAGENET), ColorJitter "
             "[nearest, bilinear or bicubic; fill None or 0..255]",
             "ToTensor() | PILToTensor() [+ ConvertImageDtype(float32|float16|bfloat16)]",
             "Normalize(mean, std) (torchvision's 0..1 units)",
             "RandomErasing(p, scale, ratio, value) last [value a number or one per channel]",
             "or an object that holds such a Compose and only applies it "
             "(torchvision's ClassificationPresetTrain/Eval)")


class Unsupported(_gpufeed.Error, ValueError):
    """A DataLoader argument, data set or transform gpufeed cannot do exactly."""
    __module__ = "gpufeed"


def _unsupported(what):
    return Unsupported(f"gpufeed.DataLoader: {what} is not supported; it supports "
                       f"torchvision ImageFolder/DatasetFolder (or a Subset of one) with the "
                       f"default loader and a transform composed of: " + "; ".join(SUPPORTED))


def _pair(v, name):
    if isinstance(v, int):
        return v, v
    if isinstance(v, (tuple, list)) and len(v) == 1:
        return v[0], v[0]
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return v[0], v[1]
    raise _unsupported(f"{name} size {v!r}")


def _interpolation(t, name):
    """t's interpolation as settings' name (PIL's resize with that filter is
    what gpufeed does); the others (LANCZOS, BOX, HAMMING, NEAREST_EXACT in
    later torchvisions) refused by name. PIL's int codes are taken too, as
    torchvision takes them (with a warning)."""
    import torchvision.transforms as T
    mode = getattr(t, "interpolation", T.InterpolationMode.BILINEAR)
    names = {T.InterpolationMode.BILINEAR: "bilinear", T.InterpolationMode.BICUBIC: "bicubic",
             T.InterpolationMode.NEAREST: "nearest",
             2: "bilinear", 3: "bicubic", 0: "nearest"}  # PIL.Image.BILINEAR, BICUBIC, NEAREST
    if isinstance(mode, bool) or mode not in names:
        raise _unsupported(f"{name} with interpolation={mode}")
    return names[mode]


def _interp_word(t, name):
    import torchvision.transforms as T
    mode = t.interpolation
    words = {T.InterpolationMode.NEAREST: "nearest", T.InterpolationMode.BILINEAR: "bilinear",
             T.InterpolationMode.BICUBIC: "bicubic",
             0: "nearest", 2: "bilinear", 3: "bicubic"}  # PIL's int codes, still taken
    if mode not in words:
        raise _unsupported(f"{name} with interpolation={mode}")
    return words[mode]


def _fill_word(fill, name):
    if fill is None:
        return ""
    vals = list(fill) if isinstance(fill, (tuple, list)) else [fill]
    if not all(float(v) == int(v) and 0 <= int(v) <= 255 for v in vals) or len(vals) not in (1, 3):
        raise _unsupported(f"{name} with fill={fill!r} (None, or whole numbers 0..255: one, "
                           "or one per channel)")
    return " fill=" + ",".join(str(int(v)) for v in vals)


def _stage_spec(t):
    """An augmentation step before the tensor -> its settings.augment stage."""
    import torchvision.transforms as T
    name = type(t).__name__
    if isinstance(t, T.TrivialAugmentWide):
        return (f"ta_wide bins={int(t.num_magnitude_bins)} "
                f"interpolation={_interp_word(t, name)}{_fill_word(t.fill, name)}")
    if isinstance(t, T.RandAugment):
        if not 0 <= int(t.magnitude) < int(t.num_magnitude_bins):
            raise IndexError(f"RandAugment: magnitude {t.magnitude} is not below "
                             f"num_magnitude_bins {t.num_magnitude_bins}")
        return (f"randaugment num_ops={int(t.num_ops)} magnitude={int(t.magnitude)} "
                f"bins={int(t.num_magnitude_bins)} interpolation={_interp_word(t, name)}"
                f"{_fill_word(t.fill, name)}")
    if isinstance(t, T.AutoAugment):
        if t.policy != T.AutoAugmentPolicy.IMAGENET:
            raise _unsupported(f"AutoAugment(policy={t.policy}) (IMAGENET only)")
        return f"autoaugment interpolation={_interp_word(t, name)}{_fill_word(t.fill, name)}"
    # ColorJitter: its ranges, as _check_input left them (None: off)
    words = [f"{k}={float(r[0])!r},{float(r[1])!r}"
             for k, r in (("brightness", t.brightness), ("contrast", t.contrast),
                          ("saturation", t.saturation), ("hue", t.hue)) if r is not None]
    return "jitter " + " ".join(words) if words else ""


def _erase_spec(t, later, dtype):
    """RandomErasing -> settings.augment's erase stage. Its value is written
    into the tensor as it is when the step runs; later steps (a dtype
    conversion, Normalize) then change it: so the value given is theirs,
    computed by torch on a one-pixel tensor of the value."""
    import torch
    if isinstance(t.value, str):
        raise _unsupported("RandomErasing(value='random')")
    vals = list(t.value) if isinstance(t.value, (tuple, list)) else [t.value]
    if len(vals) not in (1, 3):
        raise ValueError("If value is a sequence, it should have either a single value or 3 "
                         "(number of input channels)")
    x = torch.tensor([float(v) for v in vals] * (3 if len(vals) == 1 else 1),
                     dtype=torch.float32)[:, None, None].to(dtype)
    for step in later:
        x = step(x)
    out = ",".join(repr(float(v)) for v in x.flatten().tolist())
    return (f"erase p={float(t.p)!r} scale={float(t.scale[0])!r},{float(t.scale[1])!r} "
            f"ratio={float(t.ratio[0])!r},{float(t.ratio[1])!r} value={out}")


def _steps(transform):
    """The Compose's steps; a preset object (one that holds a Compose and
    only applies it, as torchvision's reference's ClassificationPresetTrain
    does) is that Compose's; anything else that is no torchvision step is
    refused by its class."""
    import torchvision.transforms as T
    if isinstance(transform, T.Compose):
        return list(transform.transforms)
    inner = _preset_compose(transform)
    if inner is not None:
        return list(inner.transforms)
    return [transform]


def _preset_compose(obj):
    """The Compose obj's __call__ applies and returns, when that is all it
    does: `def __call__(self, img): return self.X(img)` with self.X a
    Compose. Else None."""
    import dis
    import torchvision.transforms as T
    cls = type(obj)
    if cls.__module__.startswith("torchvision.") or isinstance(obj, __import__("torch").nn.Module):
        return None
    call = getattr(cls, "__call__", None)
    code = getattr(call, "__code__", None)
    if code is None or code.co_argcount != 2 or code.co_flags & 0x0C:  # *args, **kwargs
        return None
    ops = [(i.opname, i.argval) for i in dis.get_instructions(code)
           if i.opname not in ("RESUME", "PRECALL", "CACHE", "NOP", "PUSH_NULL", "COPY_FREE_VARS")]
    self_name, arg_name = code.co_varnames[0], code.co_varnames[1]
    # 3.11: LOAD_FAST self, LOAD_ATTR X, LOAD_FAST img, CALL 1, RETURN_VALUE (3.12: the same
    # with LOAD_ATTR's method bit; 3.10: CALL_FUNCTION)
    if len(ops) != 5 or ops[0] != ("LOAD_FAST", self_name) or ops[1][0] not in (
            "LOAD_ATTR", "LOAD_METHOD") or ops[2] != ("LOAD_FAST", arg_name) or \
            ops[3][0] not in ("CALL", "CALL_FUNCTION", "CALL_METHOD") or ops[3][1] != 1 or \
            ops[4][0] != "RETURN_VALUE":
        return None
    inner = getattr(obj, ops[1][1], None)
    return inner if isinstance(inner, T.Compose) else None


def translate_transform(transform):
    """torchvision transform -> ({gf_settings field: value}, uint8 NHWC?).
    Raises Unsupported for anything gpufeed would not do exactly."""
    import torch
    import torchvision.transforms as T
    steps = _steps(transform)
    if len(steps) == 1 and not isinstance(transform, T.Compose) and \
            not type(transform).__module__.startswith("torchvision."):
        raise _unsupported(f"the transform {type(transform).__name__} (an object that does more "
                           "than apply a Compose it holds)")
    kw = {}
    geometry = flip = None
    tensor = dtype = None
    normalize = None
    stages, erase = [], None
    augment_types = (T.TrivialAugmentWide, T.RandAugment, T.AutoAugment, T.ColorJitter)
    i = 0
    while i < len(steps):
        t = steps[i]
        name = type(t).__name__
        if isinstance(t, T.RandomErasing) and tensor is not None and erase is None:
            later = steps[i + 1:]
            if not all(isinstance(s, (T.Normalize, T.ConvertImageDtype)) for s in later):
                raise _unsupported(f"{type(later[0]).__name__} after RandomErasing "
                                   "(it comes last, or before ConvertImageDtype/Normalize)")
            erase = (t, later, {"uint8": torch.uint8, "float32": torch.float32,
                                "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype])
            i += 1
            continue
        if tensor is not None and not isinstance(t, (T.Normalize, T.ConvertImageDtype)):
            raise _unsupported(f"{name} after {tensor}")
        if geometry is not None and tensor is None and isinstance(t, augment_types) and \
                type(t) in augment_types:
            word = _stage_spec(t)
            if word:
                stages.append(word)
            i += 1
            continue
        if stages and tensor is None and not isinstance(t, (T.ToTensor, T.PILToTensor)):
            raise _unsupported(f"{name} after {type(steps[i - 1]).__name__}")
        if isinstance(t, T.RandomResizedCrop) and geometry is None:
            h, w = _pair(t.size, name)
            kw.update(interpolation=_interpolation(t, name), transform="train", image_size=(h, w),
                      scale=tuple(t.scale), ratio=tuple(t.ratio))
            geometry = name
        elif isinstance(t, T.Resize) and geometry is None:
            kw.update(interpolation=_interpolation(t, name))  # CenterCrop has none: one mode
            nxt = steps[i + 1] if i + 1 < len(steps) else None
            size = t.size[0] if isinstance(t.size, (tuple, list)) and len(t.size) == 1 else t.size
            if not isinstance(size, int) or t.max_size is not None:
                raise _unsupported(f"Resize(size={t.size!r}, max_size={t.max_size!r}) "
                                   "(an int shorter side only)")
            if not isinstance(nxt, T.CenterCrop):
                raise _unsupported("Resize without a CenterCrop after it")
            h, w = _pair(nxt.size, "CenterCrop")
            if max(h, w) > size:
                raise _unsupported(f"CenterCrop({nxt.size}) larger than Resize({size})")
            kw.update(transform="eval", image_size=(h, w), crop_fraction=min(h, w) / size)
            geometry = f"Resize({size}) + CenterCrop"
            i += 1
        elif isinstance(t, T.RandomHorizontalFlip) and flip is None:
            flip = float(t.p)
        elif isinstance(t, T.ToTensor) and tensor is None:
            tensor, dtype = name, "float32"
        elif isinstance(t, T.PILToTensor) and tensor is None:
            tensor, dtype = name, "uint8"
        elif isinstance(t, T.ConvertImageDtype) and tensor is not None and normalize is None:
            names = {torch.float32: "float32", torch.float16: "float16",
                     torch.bfloat16: "bfloat16"}
            if t.dtype not in names:
                raise _unsupported(f"ConvertImageDtype({t.dtype})")
            dtype = names[t.dtype]
        elif isinstance(t, T.Normalize) and tensor is not None and dtype != "uint8" \
                and normalize is None:
            # torchvision's refusal, word for word, at its first image: here, now.
            as_dtype = getattr(torch, dtype)
            if (torch.as_tensor(t.std, dtype=as_dtype) == 0).any():
                raise ValueError(f"std evaluated to zero after conversion to {as_dtype}, "
                                 "leading to division by zero.")
            normalize = t
        else:
            raise _unsupported(f"{name} here" if isinstance(t, (
                T.RandomResizedCrop, T.Resize, T.RandomHorizontalFlip, T.ToTensor, T.PILToTensor,
                T.ConvertImageDtype, T.Normalize)) else name)
        i += 1
    if geometry is None:
        raise _unsupported("a transform without RandomResizedCrop or Resize + CenterCrop "
                           "(batches need one image size)")
    if tensor is None:
        raise _unsupported("a transform that gives PIL images (no ToTensor/PILToTensor)")
    if geometry != "RandomResizedCrop" and flip:
        raise _unsupported("RandomHorizontalFlip with Resize + CenterCrop")
    kw["flip_prob"] = flip or 0.0
    kw["dtype"] = dtype
    if erase is not None:
        stages.append(_erase_spec(*erase))
    if stages:
        kw["augment"] = "; ".join(stages)
    if dtype != "uint8":
        kw["layout"] = "nchw"
        # gpufeed normalises 0..255 values: ToTensor's /255 is a std of 255.
        mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
        if normalize is not None:
            mean, std = normalize.mean, normalize.std
            mean = [float(v) for v in (mean if isinstance(mean, (tuple, list)) else [mean])]
            std = [float(v) for v in (std if isinstance(std, (tuple, list)) else [std])]
            if len(mean) == 1:
                mean = mean * 3
            if len(std) == 1:
                std = std * 3
            if len(mean) != 3 or len(std) != 3:
                raise _unsupported(f"Normalize with {len(mean)} means and {len(std)} stds "
                                   "for 3 channels")
        kw["mean"] = tuple(v * 255 for v in mean)
        kw["std"] = tuple(v * 255 for v in std)
    return kw, dtype == "uint8"


def _random_draws(transform):
    """[(kind, transform)]: the steps that draw from torch's global generator
    when torchvision applies them, in the order it applies them."""
    import torchvision.transforms as T
    kinds = ((T.RandomResizedCrop, "crop"), (T.RandomHorizontalFlip, "flip"),
             (T.TrivialAugmentWide, "pil"), (T.RandAugment, "pil"), (T.AutoAugment, "pil"),
             (T.ColorJitter, "pil"), (T.RandomErasing, "tensor"))
    return [(kind, t) for t in _steps(transform) for cls, kind in kinds if isinstance(t, cls)]


def _folder(dataset):
    """(the DatasetFolder, the Subset indices or None)."""
    import torch.utils.data as tud
    subset = None
    if isinstance(dataset, tud.Subset):
        subset = [int(i) for i in dataset.indices]
        base = dataset.dataset
    else:
        base = dataset
    # Where torchvision was never imported no DatasetFolder exists: refused
    # without importing it (0.3 s: `python -m gpufeed why|run` check every loader).
    folder = sys.modules.get("torchvision.datasets.folder")
    if folder is None or not isinstance(base, folder.DatasetFolder):
        raise _unsupported(f"a data set of type {type(base).__name__}")
    from torchvision.datasets.folder import default_loader, pil_loader
    if subset is not None:
        # Subset takes samples[indices[i]]: Python's indexing, negative ones too.
        n = len(base.samples)
        for k, i in enumerate(subset):
            if not -n <= i < n:
                raise IndexError(f"list index out of range: Subset indices[{k}] is {i}, and "
                                 f"the data set has {n} samples")
            subset[k] = i % n
    if base.loader not in (default_loader, pil_loader):
        raise _unsupported(f"a DatasetFolder loader {getattr(base.loader, '__name__', base.loader)}")
    if base.target_transform is not None:
        raise _unsupported(f"target_transform {type(base.target_transform).__name__}")
    if getattr(base, "transforms", None) is not None and \
            type(base.transforms).__name__ != "StandardTransform":
        raise _unsupported("a joint `transforms`")
    if base.transform is None:
        raise _unsupported("a data set without a transform (PIL images)")
    _refuse_tiff(base.samples, subset)
    return base, subset


def _refuse_tiff(samples, subset):
    """TIFF is in torchvision's IMG_EXTENSIONS but gpufeed decodes none: say so
    now, not at the first one mid-epoch."""
    paths = [samples[i][0] for i in subset] if subset is not None else [p for p, _ in samples]
    tiffs = [p for p in paths if os.fsdecode(p).lower().endswith((".tif", ".tiff"))]
    if tiffs:
        raise Unsupported(f"gpufeed.DataLoader: {tiffs[0]} is a TIFF file, which gpufeed does "
                          f"not decode ({len(tiffs)} of the {len(paths)} samples are .tif or "
                          f".tiff): convert them (to PNG, say) or leave them out")


def _checked(dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
             num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
             worker_init_fn=None, multiprocessing_context=None, generator=None, *,
             prefetch_factor=None, persistent_workers=False, pin_memory_device=""):
    """Every check DataLoader's __init__ makes, nothing opened: (the
    DatasetFolder, the Subset indices or None, the settings, uint8?).
    Raises what __init__ raises (Unsupported, or torch's ValueError)."""
    if batch_sampler is not None:
        raise _unsupported("batch_sampler (give sampler= and batch_size=)")
    if batch_size is None:
        raise _unsupported("batch_size=None (unbatched samples)")
    if worker_init_fn is not None:
        raise _unsupported("worker_init_fn (gpufeed decodes in threads, not workers)")
    if timeout:
        raise _unsupported(f"timeout={timeout}")
    if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
        raise ValueError("num_workers option should be non-negative")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
        raise ValueError(f"batch_size should be a positive integer value, but got "
                         f"batch_size={batch_size}")
    if prefetch_factor is not None and (not isinstance(prefetch_factor, int)
                                        or prefetch_factor < 1):
        raise ValueError("prefetch_factor option should be a positive integer")
    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")
    # torch's own refusals, word for word: a script that torch refuses is refused.
    if num_workers == 0 and prefetch_factor not in (None, 2):
        raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                         "let num_workers > 0 to enable multiprocessing.")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")
    base, subset = _folder(dataset)
    settings, uint8 = translate_transform(base.transform)
    if type(collate_fn) is MixUpCutMix:  # exactly ours: a subclass may do more
        if uint8:
            raise _unsupported("MixUpCutMix on uint8 images (add ConvertImageDtype(float))")
        settings["augment"] = "; ".join(
            [s for s in [settings.get("augment"), collate_fn.spec()] if s])
    return base, subset, settings, uint8


def _check(dataset, *args, **kwargs):
    """None where gpufeed.DataLoader(dataset, *args, **kwargs) would be made,
    else the Unsupported message saying why not: the constructor's own
    checks (_checked), no loader opened. Any other error the constructor
    would raise (torch's ValueError, a TypeError, a Subset's IndexError)
    raises here too."""
    try:
        _checked(dataset, *args, **kwargs)
    except Unsupported as e:
        return str(e)
    return None


class MixUpCutMix:
    """A collate_fn: default_collate, then MixUp or CutMix on the batch, as
    torchvision's v2 MixUp/CutMix and its reference's RandomMixup/
    RandomCutmix (the batch rolled by one; lam ~ Beta(alpha, alpha); CutMix
    with probability switch_prob when both alphas are above 0, else the one
    that is), giving soft targets (batch, num_classes). With torch's
    DataLoader it runs in torch, in the workers; gpufeed.DataLoader runs it
    in C, in place on the batch (on the device on CUDA): augment's `mix`
    stage, the same distributions from gpufeed's per-batch key (not torch's
    generator's numbers)."""

    def __init__(self, num_classes, mixup_alpha=1.0, cutmix_alpha=1.0, switch_prob=0.5):
        if not (mixup_alpha >= 0 and cutmix_alpha >= 0 and mixup_alpha + cutmix_alpha > 0):
            raise ValueError("MixUpCutMix: mixup_alpha and cutmix_alpha are >= 0, one above 0")
        if not 0 <= switch_prob <= 1:
            raise ValueError("MixUpCutMix: switch_prob is a probability")
        self.num_classes, self.mixup_alpha = int(num_classes), float(mixup_alpha)
        self.cutmix_alpha, self.switch_prob = float(cutmix_alpha), float(switch_prob)

    def spec(self):
        """settings.augment's stage."""
        return (f"mix mixup={self.mixup_alpha!r} cutmix={self.cutmix_alpha!r} "
                f"switch={self.switch_prob!r} classes={self.num_classes}")

    def draw(self):
        """(cutmix?, lam, (r_x, r_y) or None's generator draws): torch's."""
        import torch
        cut = self.cutmix_alpha > 0 and (self.mixup_alpha == 0 or
                                         float(torch.rand(1)) < self.switch_prob)
        alpha = self.cutmix_alpha if cut else self.mixup_alpha
        lam = float(torch._sample_dirichlet(torch.tensor([alpha, alpha]))[0])
        return cut, lam

    def __call__(self, batch):
        import math
        import torch
        from torch.utils.data._utils.collate import default_collate
        images, target = default_collate(batch)
        target = torch.nn.functional.one_hot(target, self.num_classes).to(images.dtype)
        cut, lam = self.draw()
        rolled, target_rolled = images.roll(1, 0), target.roll(1, 0)
        if cut:
            H, W = images.shape[-2:]
            r_x, r_y = int(torch.randint(W, (1,))), int(torch.randint(H, (1,)))
            r = 0.5 * math.sqrt(1.0 - lam)
            rw, rh = int(r * W), int(r * H)
            x1, y1, x2, y2 = max(r_x - rw, 0), max(r_y - rh, 0), min(r_x + rw, W), min(r_y + rh, H)
            images = images.clone()
            images[..., y1:y2, x1:x2] = rolled[..., y1:y2, x1:x2]
            lam = 1.0 - (x2 - x1) * (y2 - y1) / (W * H)
        else:
            images = images * lam + rolled * (1.0 - lam)
        return images, target * lam + target_rolled * (1.0 - lam)


class _DataLoader:
    """torch.utils.data.DataLoader's signature and behaviour, gpufeed's speed.
    See the module's docstring for what is supported and where it differs."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device=""):
        import torch
        import torch.utils.data as tud
        from torch.utils.data._utils.collate import default_collate
        base, subset, settings, self._uint8 = _checked(
            dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn,
            pin_memory, drop_last, timeout, worker_init_fn, multiprocessing_context, generator,
            prefetch_factor=prefetch_factor, persistent_workers=persistent_workers,
            pin_memory_device=pin_memory_device)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = bool(drop_last)
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = bool(pin_memory)
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = None
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.generator = generator
        # Any collate_fn is handed the batch's samples as DataLoader's list of
        # (image, target) (the images views into the batch): torchvision's
        # reference's MixUp/CutMix lambda runs unchanged, in this process.
        self.collate_fn = default_collate if collate_fn is None else collate_fn
        if sampler is None:
            sampler = (tud.RandomSampler(dataset, generator=generator) if shuffle
                       else tud.SequentialSampler(dataset))
        self.sampler = sampler
        self.batch_sampler = tud.BatchSampler(sampler, batch_size, self.drop_last)
        self._pin = self.pin_memory and torch.cuda.is_available()

        self._base, self._subset = base, subset
        threads = max(1, num_workers)
        depth = max(2, (prefetch_factor or 2) * threads)
        settings.update(batch_size=batch_size, threads=threads, prefetch_depth=min(depth, 64),
                        drop_last=self.drop_last, channels=3, device="cpu", epochs=0,
                        shuffle=False, on_error="fail", strictness="lenient",
                        rank=0, world=1)
        self._settings = settings
        # With num_workers=0 torch's transforms draw from the global generator.
        self._replay = _random_draws(base.transform) if num_workers == 0 else []
        self._sizes = None  # (height, width) per sample, read when first needed
        self._stand_ins = None
        self._default_collate = default_collate
        self._seed = None
        self._c = None
        self._epochs_started = 0
        self._iterator = None
        # As torch's at the end of its __init__: from here its __setattr__
        # refuses a new batch_size, sampler, dataset... (a subclass of it).
        object.__setattr__(self, "_DataLoader__initialized", True)

    def _open(self):
        from . import _settings, _path
        paths = [p for p, _ in self._base.samples]
        labels = [int(t) for _, t in self._base.samples]
        # The samples' paths already start with the folder's root, as torchvision
        # opens them: relative ones are relative to the current directory, not to
        # the root (a relative root joined to them again named no file).
        self._c = _gpufeed._Loader("", _settings(self._settings), samples=(paths, labels))

    def __len__(self):
        return len(self.batch_sampler)

    def __iter__(self):
        import torch
        # As DataLoader's iterator: the base seed first (persistent workers keep
        # the first iterator's), then the sampler's draws.
        if self._seed is None or not (self.persistent_workers and self.num_workers > 0):
            self._seed = torch.empty((), dtype=torch.int64).random_(
                generator=self.generator).item()
        seed = self._seed
        order = list(iter(self.sampler))
        if self._subset is not None:
            order = [self._subset[i] for i in order]
        order = array.array("q", order)  # ready before the loader opens: no gap after it
        if self._c is None:
            self._open()
        epoch = self._epochs_started
        self._epochs_started += 1
        self._c.set_order(seed & (2**64 - 1), epoch, order)
        it = _Iter(self, epoch)
        # Weak: the iterator holds the loader, and a cycle would keep the
        # loader's threads running until the garbage collector came by.
        self._iterator = weakref.ref(it)
        return it

    def _size(self, index):
        """Sample index's (height, width), as PIL opens it for torchvision."""
        if self._sizes is None:
            self._sizes = array.array("i", [-1]) * (2 * len(self._base.samples))
        h = self._sizes[2 * index]
        if h < 0:
            from PIL import Image
            with Image.open(self._base.samples[index][0]) as im:  # the header only
                w, h = im.size
            self._sizes[2 * index], self._sizes[2 * index + 1] = h, w
        return h, self._sizes[2 * index + 1]

    def _replay_draws(self, indices):
        """The global generator's draws torch's transforms make for these samples."""
        import torch
        for index in indices:
            for kind, t in self._replay:
                if kind == "crop":
                    h, w = self._size(index)
                    t.get_params(torch.empty(1, 1, 1).expand(3, h, w), t.scale, t.ratio)
                elif kind == "flip":
                    torch.rand(1)
                else:  # the step itself, on a stand-in: its draws do not depend on the pixels
                    t(self._stand_in(kind))

    def _stand_in(self, kind):
        if self._stand_ins is None:
            from PIL import Image
            import torch
            h, w = self._settings["image_size"]
            self._stand_ins = {"pil": Image.new("RGB", (1, 1)),
                               "tensor": torch.zeros(3, h, w)}
        return self._stand_ins[kind]

    def close(self):
        """Stops iteration and lets the loader close once its batches are gone."""
        c, self._c = getattr(self, "_c", None), None
        if c is not None:
            c.close()

    def __del__(self):
        self.close()


def _subclass():
    """gpufeed.DataLoader, made on first use (`import gpufeed` imports no
    torch): a torch.utils.data.DataLoader, so that isinstance holds and a
    framework that takes a DataLoader by its class (Lightning, Accelerate,
    Keras 3's torch backend) takes it, and re-creates it by its class with
    a sampler of its own. Nothing of torch's loader runs: its __init__ is
    never called (no worker processes); its __setattr__ (attributes fixed
    after __init__) and multiprocessing_context's checks are torch's own.
    Without torch, the class alone (its __init__ fails importing torch)."""
    try:
        from torch.utils.data import DataLoader as TorchDataLoader
    except ImportError:
        return _DataLoader
    # Under `python -m gpufeed run` the name is a stand-in: torch's own class is behind it.
    TorchDataLoader = getattr(TorchDataLoader, "_gpufeed_torch_class", TorchDataLoader)
    return type("DataLoader", (_DataLoader, TorchDataLoader),
                {"__module__": "gpufeed", "__qualname__": "DataLoader",
                 "__doc__": _DataLoader.__doc__})


class _Iter:
    def __init__(self, loader, epoch):
        self._loader = loader
        self._epoch = epoch
        self._done = False
        self._pending = None
        self._pending_replayed = False  # its draws are made

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        import torch
        lo = self._loader
        if self._done:
            raise StopIteration
        if lo._iterator() is not self:
            raise RuntimeError("gpufeed.DataLoader: a newer iter() started the next epoch; "
                               "this iterator is finished (one iterator at a time)")
        t, self._pending = self._pending, None
        replayed, self._pending_replayed = self._pending_replayed, False
        if t is None:
            t = lo._c.take()
        if t is None:
            self._done = True
            raise StopIteration
        b = t[0]
        try:  # a KeyboardInterrupt before the batch is handed out keeps it for next time
            if lo._replay and not replayed:
                lo._replay_draws(torch.from_dlpack(b.indices).tolist())
                replayed = True  # once, even if the batch is kept for next time
            images = torch.from_dlpack(b.data)
            targets = torch.from_dlpack(b.labels)  # int64
            if lo._uint8:
                images = images.permute(0, 3, 1, 2)
            if lo._pin:
                images, targets = images.pin_memory(), targets.pin_memory()
        except BaseException:
            self._pending, self._pending_replayed = t, replayed
            raise
        if type(lo.collate_fn) is MixUpCutMix:  # done in C: the soft targets
            if lo.num_workers == 0:  # the generator's draws torch's call would have made
                cut, _ = lo.collate_fn.draw()
                if cut:
                    torch.randint(images.shape[-1], (1,)), torch.randint(images.shape[-2], (1,))
            return images, torch.from_dlpack(b.targets)
        if lo.collate_fn is not lo._default_collate:
            return lo.collate_fn(list(zip(images.unbind(0), targets.tolist())))
        return images, targets  # the tensors hold the slot; b's claim ends with this frame
