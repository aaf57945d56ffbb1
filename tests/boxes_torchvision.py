"""gpufeed's detection boxes moved with the image (src/boxes.c, printed by
tests/boxes_apply.c) held to torchvision's v2 box kernels: RandomResizedCrop
(crop_bounding_boxes + resize_bounding_boxes, as resized_crop_bounding_boxes
does) then RandomHorizontalFlip (horizontal_flip_bounding_boxes), and eval's
Resize + CenterCrop, box for box within 1e-3 px, the same boxes dropped.

The installed torchvision (0.14) has no transforms.v2: its kernels are
ported below verbatim. Run by meson as the test boxes_torchvision
(GPUFEED_BOXES_APPLY names the program); skipped without numpy, torch or
torchvision."""
import enum
import numbers
import os
import subprocess
import types
from typing import List, Optional, Tuple

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
from torchvision.ops import box_area, clip_boxes_to_image  # noqa: E402
from torchvision.transforms import RandomResizedCrop  # noqa: E402
from torchvision.transforms import functional as F_v1  # noqa: E402

EXE = os.environ.get("GPUFEED_BOXES_APPLY")
if not EXE:
    pytest.skip("GPUFEED_BOXES_APPLY is not set (run through meson)", allow_module_level=True)

TOL = 1e-3  # px, in the output image

# ---- shims: what the verbatim code below needs that 0.14 lacks (ours) ----


class BoundingBoxFormat(enum.Enum):
    XYXY = "XYXY"
    XYWH = "XYWH"
    CXCYWH = "CXCYWH"


tv_tensors = types.SimpleNamespace(BoundingBoxFormat=BoundingBoxFormat)
is_pure_tensor = lambda inpt: True  # noqa: E731: every box here is a plain tensor


def _log_api_usage_once(obj):
    pass


def __compute_resized_output_size(canvas_size, size, max_size=None, allow_size_none=False):
    # v1's, as installed; allow_size_none only matters for size=None (unused here)
    return F_v1._compute_resized_output_size(canvas_size, size, max_size)


# ---- torchvision's v2 box kernels, verbatim ----
# From pytorch/vision, torchvision/transforms/v2/functional/_meta.py and
# _geometry.py as released in torchvision 0.17 to 0.20 (tv_tensors, typing's
# Tuple/List; 0.21 moved to tuple/list and later added rotated boxes and
# clamping_mode, neither of which changes XYXY arithmetic). Only the kernels
# the transforms below reach; dispatch wrappers left out.

# _meta.py


def _convert_bounding_box_format(
    bounding_boxes: torch.Tensor, old_format: BoundingBoxFormat, new_format: BoundingBoxFormat, inplace: bool = False
) -> torch.Tensor:

    if new_format == old_format:
        return bounding_boxes

    raise NotImplementedError("only XYXY is ported (the rest of the body: XYWH, CXCYWH)")  # shim


def convert_bounding_box_format(
    inpt: torch.Tensor,
    old_format: Optional[BoundingBoxFormat] = None,
    new_format: Optional[BoundingBoxFormat] = None,
    inplace: bool = False,
) -> torch.Tensor:
    """See :func:`~torchvision.transforms.v2.ConvertBoundingBoxFormat` for details."""
    # This being a kernel / functional hybrid, we need an option to pass `old_format` explicitly for pure tensor
    # inputs as well as extract it from `tv_tensors.BoundingBoxes` inputs. However, putting a default value on
    # `old_format` means we also need to put one on `new_format` to have syntactically correct Python. Here we mimic the
    # default error that would be thrown if `new_format` had no default value.
    if new_format is None:
        raise TypeError("convert_bounding_box_format() missing 1 required argument: 'new_format'")

    if not torch.jit.is_scripting():
        _log_api_usage_once(convert_bounding_box_format)

    if isinstance(old_format, str):
        old_format = BoundingBoxFormat[old_format.upper()]
    if isinstance(new_format, str):
        new_format = BoundingBoxFormat[new_format.upper()]

    if torch.jit.is_scripting() or is_pure_tensor(inpt):
        if old_format is None:
            raise ValueError("For pure tensor inputs, `old_format` has to be passed.")
        return _convert_bounding_box_format(inpt, old_format=old_format, new_format=new_format, inplace=inplace)
    # (the tv_tensors.BoundingBoxes branch: not reached with plain tensors)


def _clamp_bounding_boxes(
    bounding_boxes: torch.Tensor, format: BoundingBoxFormat, canvas_size: Tuple[int, int]
) -> torch.Tensor:
    # TODO: Investigate if it makes sense from a performance perspective to have an implementation for every
    #  BoundingBoxFormat instead of converting back and forth
    in_dtype = bounding_boxes.dtype
    bounding_boxes = bounding_boxes.clone() if bounding_boxes.is_floating_point() else bounding_boxes.float()
    xyxy_boxes = convert_bounding_box_format(
        bounding_boxes, old_format=format, new_format=tv_tensors.BoundingBoxFormat.XYXY, inplace=True
    )
    xyxy_boxes[..., 0::2].clamp_(min=0, max=canvas_size[1])
    xyxy_boxes[..., 1::2].clamp_(min=0, max=canvas_size[0])
    out_boxes = convert_bounding_box_format(
        xyxy_boxes, old_format=BoundingBoxFormat.XYXY, new_format=format, inplace=True
    )
    return out_boxes.to(in_dtype)


def clamp_bounding_boxes(
    inpt: torch.Tensor,
    format: Optional[BoundingBoxFormat] = None,
    canvas_size: Optional[Tuple[int, int]] = None,
) -> torch.Tensor:
    """See :func:`~torchvision.transforms.v2.ClampBoundingBoxes` for details."""
    if not torch.jit.is_scripting():
        _log_api_usage_once(clamp_bounding_boxes)

    if torch.jit.is_scripting() or is_pure_tensor(inpt):

        if format is None or canvas_size is None:
            raise ValueError("For pure tensor inputs, `format` and `canvas_size` have to be passed.")
        return _clamp_bounding_boxes(inpt, format=format, canvas_size=canvas_size)
    # (the tv_tensors.BoundingBoxes branch: not reached with plain tensors)


# _geometry.py


def horizontal_flip_bounding_boxes(
    bounding_boxes: torch.Tensor, format: tv_tensors.BoundingBoxFormat, canvas_size: Tuple[int, int]
) -> torch.Tensor:
    shape = bounding_boxes.shape

    bounding_boxes = bounding_boxes.clone().reshape(-1, 4)

    if format == tv_tensors.BoundingBoxFormat.XYXY:
        bounding_boxes[:, [2, 0]] = bounding_boxes[:, [0, 2]].sub_(canvas_size[1]).neg_()
    elif format == tv_tensors.BoundingBoxFormat.XYWH:
        bounding_boxes[:, 0].add_(bounding_boxes[:, 2]).sub_(canvas_size[1]).neg_()
    else:  # format == tv_tensors.BoundingBoxFormat.CXCYWH:
        bounding_boxes[:, 0].sub_(canvas_size[1]).neg_()

    return bounding_boxes.reshape(shape)


def _compute_resized_output_size(
    canvas_size: Tuple[int, int], size: Optional[List[int]], max_size: Optional[int] = None
) -> List[int]:
    if isinstance(size, int):
        size = [size]
    elif max_size is not None and size is not None and len(size) != 1:
        raise ValueError(
            "max_size should only be passed if size is None or specifies the length of the smaller edge, "
            "i.e. size should be an int or a sequence of length 1 in torchscript mode."
        )
    return __compute_resized_output_size(canvas_size, size=size, max_size=max_size, allow_size_none=True)


def resize_bounding_boxes(
    bounding_boxes: torch.Tensor,
    canvas_size: Tuple[int, int],
    size: Optional[List[int]],
    max_size: Optional[int] = None,
) -> Tuple[torch.Tensor, Tuple[int, int]]:
    old_height, old_width = canvas_size
    new_height, new_width = _compute_resized_output_size(canvas_size, size=size, max_size=max_size)

    if (new_height, new_width) == (old_height, old_width):
        return bounding_boxes, canvas_size

    w_ratio = new_width / old_width
    h_ratio = new_height / old_height
    ratios = torch.tensor([w_ratio, h_ratio, w_ratio, h_ratio], device=bounding_boxes.device)
    return (
        bounding_boxes.mul(ratios).to(bounding_boxes.dtype),
        (new_height, new_width),
    )


def crop_bounding_boxes(
    bounding_boxes: torch.Tensor,
    format: tv_tensors.BoundingBoxFormat,
    top: int,
    left: int,
    height: int,
    width: int,
) -> Tuple[torch.Tensor, Tuple[int, int]]:

    # Crop or implicit pad if left and/or top have negative values:
    if format == tv_tensors.BoundingBoxFormat.XYXY:
        sub = [left, top, left, top]
    else:
        sub = [left, top, 0, 0]

    bounding_boxes = bounding_boxes - torch.tensor(sub, dtype=bounding_boxes.dtype, device=bounding_boxes.device)
    canvas_size = (height, width)

    return clamp_bounding_boxes(bounding_boxes, format=format, canvas_size=canvas_size), canvas_size


def _center_crop_parse_output_size(output_size: List[int]) -> List[int]:
    if isinstance(output_size, numbers.Number):
        s = int(output_size)
        return [s, s]
    elif isinstance(output_size, (tuple, list)) and len(output_size) == 1:
        return [output_size[0], output_size[0]]
    else:
        return list(output_size)


def _center_crop_compute_crop_anchor(
    crop_height: int, crop_width: int, image_height: int, image_width: int
) -> Tuple[int, int]:
    crop_top = int(round((image_height - crop_height) / 2.0))
    crop_left = int(round((image_width - crop_width) / 2.0))
    return crop_top, crop_left


def center_crop_bounding_boxes(
    bounding_boxes: torch.Tensor,
    format: tv_tensors.BoundingBoxFormat,
    canvas_size: Tuple[int, int],
    output_size: List[int],
) -> Tuple[torch.Tensor, Tuple[int, int]]:
    crop_height, crop_width = _center_crop_parse_output_size(output_size)
    crop_top, crop_left = _center_crop_compute_crop_anchor(crop_height, crop_width, *canvas_size)
    return crop_bounding_boxes(
        bounding_boxes, format, top=crop_top, left=crop_left, height=crop_height, width=crop_width
    )


def resized_crop_bounding_boxes(
    bounding_boxes: torch.Tensor,
    format: tv_tensors.BoundingBoxFormat,
    top: int,
    left: int,
    height: int,
    width: int,
    size: List[int],
) -> Tuple[torch.Tensor, Tuple[int, int]]:
    bounding_boxes, canvas_size = crop_bounding_boxes(bounding_boxes, format, top, left, height, width)
    return resize_bounding_boxes(bounding_boxes, canvas_size=canvas_size, size=size)


# _misc.py, torchvision 0.21 (SanitizeBoundingBoxes' rule; 0.17 to 0.20 the
# same less the min_area term): only for where it differs from ours.


def _get_sanitize_bounding_boxes_mask(
    bounding_boxes: torch.Tensor,
    format: tv_tensors.BoundingBoxFormat,
    canvas_size: Tuple[int, int],
    min_size: float = 1.0,
    min_area: float = 1.0,
) -> torch.Tensor:

    bounding_boxes = _convert_bounding_box_format(
        bounding_boxes, new_format=tv_tensors.BoundingBoxFormat.XYXY, old_format=format
    )

    image_h, image_w = canvas_size
    ws, hs = bounding_boxes[:, 2] - bounding_boxes[:, 0], bounding_boxes[:, 3] - bounding_boxes[:, 1]
    valid = (ws >= min_size) & (hs >= min_size) & (bounding_boxes >= 0).all(dim=-1) & (ws * hs >= min_area)
    # TODO: Do we really need to check for out of bounds here? All
    # transforms should be clamping anyway, so this should never happen?
    image_h, image_w = canvas_size
    valid &= (bounding_boxes[:, 0] <= image_w) & (bounding_boxes[:, 2] <= image_w)
    valid &= (bounding_boxes[:, 1] <= image_h) & (bounding_boxes[:, 3] <= image_h)
    return valid


XYXY = BoundingBoxFormat.XYXY

# ---- the reference pipelines and our drop rule on their result ----


def no_area_rule(boxes):
    """Ours: kept when x2 > x1 and y2 > y1 (torchvision's SanitizeBoundingBoxes
    cannot say this: its min_size must be >= 1; see test_sanitize_differs)."""
    return (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])


def tv_train(boxes, top, left, height, width, out_w, out_h, flip):
    """RandomResizedCrop's boxes (i, j, h, w from get_params), then the flip."""
    b, canvas = resized_crop_bounding_boxes(boxes, XYXY, top, left, height, width, [out_h, out_w])
    assert canvas == (out_h, out_w)
    if flip:
        b = horizontal_flip_bounding_boxes(b, XYXY, canvas)
    return b


def tv_eval(boxes, W, H, s, out_w, out_h, flip):
    """Resize(s) then CenterCrop((out_h, out_w)), then the flip."""
    b, canvas = resize_bounding_boxes(boxes, (H, W), [s])
    b, canvas = center_crop_bounding_boxes(b, XYXY, canvas, [out_h, out_w])
    assert canvas == (out_h, out_w)
    if flip:
        b = horizontal_flip_bounding_boxes(b, XYXY, canvas)
    return b


# ---- the program ----


def run(cases):
    """cases: (out_w, out_h, (cx, cy, cw, ch), flip, rows as float64 (n, cols)).
    Returns per case a (k, cols) float32 array, or the error text."""
    lines = []
    for out_w, out_h, crop, flip, rows in cases:
        n, cols = rows.shape
        lines.append(" ".join(map(repr, [out_w, out_h, *map(float, crop), int(flip), cols, n])))
        lines.extend(" ".join(repr(float(v)) for v in row) for row in rows)
    out = subprocess.run([EXE], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=True).stdout.splitlines()
    got, at = [], 0
    for _, _, _, _, rows in cases:
        head = out[at].split(" ", 1)
        at += 1
        if head[0] == "error":
            got.append(head[1])
            continue
        k = int(head[1])
        got.append(np.array([out[at + i].split() for i in range(k)], dtype=np.float32)
                   .reshape(k, rows.shape[1]))
        at += k
    assert at == len(out)
    return got


# ---- the random cases ----


def random_boxes(rng, W, H, crop, out_w, out_h, cols):
    """Boxes in the image around crop (x, y, w, h): inside, across an edge,
    outside, degenerate, on its edges, slivers, anywhere; float32 values (one
    input for torchvision in float32 and float64 alike)."""
    x, y, w, h = crop
    px, py = w / out_w, h / out_h  # an output pixel in source pixels
    rows = []
    for _ in range(int(rng.integers(1, 13))):
        kind = rng.integers(0, 7)
        if kind == 0:  # inside the crop
            x1, x2 = np.sort(rng.uniform(x, x + w, 2))
            y1, y2 = np.sort(rng.uniform(y, y + h, 2))
        elif kind == 1:  # across one or more of its edges
            x1, x2 = np.sort(rng.uniform(x - 0.5 * w, x + 1.5 * w, 2))
            y1, y2 = np.sort(rng.uniform(y - 0.5 * h, y + 1.5 * h, 2))
        elif kind == 2:  # entirely outside it, on one side
            side = rng.integers(0, 4)
            x1, x2 = np.sort(rng.uniform(0, W, 2))
            y1, y2 = np.sort(rng.uniform(0, H, 2))
            if side == 0:
                x1, x2 = np.sort(rng.uniform(x - w, x, 2))
            elif side == 1:
                x1, x2 = np.sort(rng.uniform(x + w, x + 2 * w, 2))
            elif side == 2:
                y1, y2 = np.sort(rng.uniform(y - h, y, 2))
            else:
                y1, y2 = np.sort(rng.uniform(y + h, y + 2 * h, 2))
        elif kind == 3:  # degenerate: a line, a point, inverted
            x1, x2 = rng.uniform(x - 0.2 * w, x + 1.2 * w, 2)
            y1, y2 = rng.uniform(y - 0.2 * h, y + 1.2 * h, 2)
            d = rng.integers(0, 3)
            if d == 0:
                x2 = x1
            elif d == 1:
                y2 = y1
            else:
                x1, x2 = max(x1, x2), min(x1, x2)
        elif kind == 4:  # integer corners, some on the crop's edges
            xs = [x, x + w, x - 1, x + 1, x + w - 1, x + w + 1, rng.integers(0, W + 1)]
            ys = [y, y + h, y - 1, y + 1, y + h - 1, y + h + 1, rng.integers(0, H + 1)]
            x1, x2 = np.sort(rng.choice(xs, 2))
            y1, y2 = np.sort(rng.choice(ys, 2))
        elif kind == 5:  # a sliver: 0.05 to 0.9 output pixels wide
            x1 = rng.uniform(x, x + w)
            y1 = rng.uniform(y, y + h)
            x2 = x1 + rng.uniform(0.05, 0.9) * px
            y2 = y1 + rng.uniform(1, 20) * py
        else:  # anywhere in (and a little around) the image
            x1, x2 = np.sort(rng.uniform(-0.2 * W, 1.2 * W, 2))
            y1, y2 = np.sort(rng.uniform(-0.2 * H, 1.2 * H, 2))
        row = [x1, y1, x2, y2]
        if cols == 5:
            row.append(rng.integers(0, 91) if rng.random() < 0.8 else rng.uniform(-5, 5))
        rows.append(row)
    return np.array(rows, dtype=np.float32).astype(np.float64)


def train_cases(n, seed):
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    cases = []
    while len(cases) < n:
        W, H = (int(v) for v in rng.integers(1, 2049, 2)) if rng.random() < 0.9 else \
            (int(v) for v in rng.integers(1, 17, 2))
        if rng.random() < 0.8:
            scale, ratio = (0.08, 1.0), (3 / 4, 4 / 3)
        else:  # ranges that often fall back to the central crop
            scale = sorted(float(v) for v in rng.uniform(0.01, 1, 2))
            ratio = sorted(float(v) for v in np.exp(rng.uniform(-2, 2, 2)))
        img = torch.empty(1, 1, 1).expand(1, H, W)
        i, j, h, w = RandomResizedCrop.get_params(img, list(scale), list(ratio))
        if w < 1 or h < 1:  # get_params' fallback on a tiny image: a crop of nothing
            continue
        if rng.random() < 0.1:  # the resize a no-op: torchvision's early return
            out_w, out_h = w, h
        else:
            out_w, out_h = (int(v) for v in rng.integers(1, 641, 2))
        flip = bool(rng.random() < 0.5)
        cols = 5 if rng.random() < 0.5 else 4
        rows = random_boxes(rng, W, H, (j, i, w, h), out_w, out_h, cols)
        cases.append(dict(W=W, H=H, crop=(j, i, w, h), out_w=out_w, out_h=out_h, flip=flip, rows=rows,
                          big=1.2 * max(W, H, out_w, out_h)))
    return cases


EDGE = 1e-4  # px: a box this close to no area may go either way


def compare(case, got, want64, want32, edge_ok=False):
    """got: the program's kept rows; want: torchvision's boxes, every row, from
    the same float32 values in float64 (as the program gets them) and in
    float32 (as torchvision would from a float32 .npy). Every box the rule
    keeps on torchvision's is kept, within TOL px of the float64 result and of
    the float32 one to its own precision (a few of its ulps at the largest
    coordinate it passes through, case["big"]), with its class; every other
    is dropped. A box within EDGE px of no area (at a crop edge that is not a
    float: eval's) is ill-conditioned in torchvision too (its float32 and
    float64 can disagree): with edge_ok either way is right, else there must
    be none. Returns the largest differences (float64, float32) in px and
    the count of edge boxes."""
    rows = case["rows"]
    cols = rows.shape[1]
    assert not isinstance(got, str), f"{case}: refused: {got}"
    tol32 = max(TOL, 4 * float(np.spacing(np.float32(case["big"]))))
    side64 = torch.minimum(want64[:, 2] - want64[:, 0], want64[:, 3] - want64[:, 1])
    side32 = torch.minimum(want32[:, 2] - want32[:, 0], want32[:, 3] - want32[:, 1])
    keep = no_area_rule(want64).numpy()
    edge = (((side64 > 0) & (side64 <= EDGE)) | ((side32 > 0) & (side32 <= EDGE)) |
            (no_area_rule(want64) != no_area_rule(want32))).numpy()
    assert edge_ok or not edge.any(), f"{case}: boxes {np.flatnonzero(edge)} at the edge of no area"
    w64, w32 = want64.numpy(), want32.numpy()
    worst64 = worst32 = 0.0
    at = 0
    for r in range(len(rows)):
        if not keep[r] and not edge[r]:
            continue
        d64 = d32 = np.inf
        if at < len(got) and (cols == 4 or got[at, 4] == np.float32(rows[r, 4])):
            d64 = float(np.abs(got[at, :4] - w64[r]).max())
            d32 = float(np.abs(got[at, :4] - w32[r]).max())
        if d64 <= TOL:
            assert d32 <= tol32, f"{case}: box {r} {d32} px from torchvision's float32 {w32[r]}"
            worst64, worst32 = max(worst64, d64), max(worst32, d32)
            at += 1
        else:
            assert edge[r], (f"{case}: box {r} {rows[r]} is torchvision's {w64[r]}; "
                             f"kept {got[at] if at < len(got) else 'nothing'} ({d64} px)")
    assert at == len(got), f"{case}: {len(got) - at} boxes kept that torchvision's drop\n{got}"
    # what we write obeys the rule it was chosen by, inside the output
    assert (got[:, 2] > got[:, 0]).all() and (got[:, 3] > got[:, 1]).all()
    assert (got[:, :4] >= 0).all() and (got[:, [0, 2]] <= case["out_w"]).all()
    assert (got[:, [1, 3]] <= case["out_h"]).all()
    return worst64, worst32, int(edge.sum())


N_TRAIN = 1000


def test_random_resized_crop_and_flip_boxes_are_torchvisions():
    cases = train_cases(N_TRAIN, seed=20240611)
    got = run([(c["out_w"], c["out_h"], c["crop"], c["flip"], c["rows"]) for c in cases])
    worst64 = worst32 = 0.0
    boxes = kept = 0
    for c, g in zip(cases, got):
        j, i, w, h = c["crop"]
        want = [tv_train(torch.tensor(c["rows"][:, :4], dtype=dt), i, j, h, w, c["out_w"], c["out_h"],
                         c["flip"]) for dt in (torch.float64, torch.float32)]
        d64, d32, _ = compare(c, g, *want)
        worst64, worst32 = max(worst64, d64), max(worst32, d32)
        boxes += len(c["rows"])
        kept += len(g)
    dropped = boxes - kept
    print(f"\n{N_TRAIN} cases, {boxes} boxes: {kept} kept, {dropped} dropped; "
          f"largest difference {worst64:.3g} px (torchvision in float64), "
          f"{worst32:.3g} px (in float32)")
    assert worst64 <= TOL and worst32 <= TOL
    assert kept > boxes / 4 and dropped > boxes / 10  # both sides of the rule exercised


def test_eval_resize_center_crop_boxes_are_torchvisions():
    """Eval's fractional rectangle (Resize(s) + CenterCrop((out_h, out_w)) in
    source pixels, as src/crop.c plans it: tests/crop_torchvision.py) against
    torchvision's resize then center crop of the boxes."""
    rng = np.random.default_rng(7)
    cases = []
    for k in range(60):
        W, H = (int(v) for v in rng.integers(20, 3000, 2))
        out_w, out_h = (int(v) for v in rng.integers(8, 400, 2))
        s = max(out_w, out_h) + int(rng.integers(0, 64))  # the crop fits the resized image
        rh, rw = F_v1._compute_resized_output_size((H, W), [s])
        top, left = _center_crop_compute_crop_anchor(out_h, out_w, rh, rw)
        crop = (left * W / rw, top * H / rh, out_w * W / rw, out_h * H / rh)
        flip = k % 2 == 1
        cols = 5 if k % 3 else 4
        rows = random_boxes(rng, W, H, crop, out_w, out_h, cols)
        cases.append(dict(W=W, H=H, s=s, crop=crop, out_w=out_w, out_h=out_h, flip=flip, rows=rows,
                          big=1.2 * max(W, H, rw, rh)))
    got = run([(c["out_w"], c["out_h"], c["crop"], c["flip"], c["rows"]) for c in cases])
    worst64 = worst32 = 0.0
    edges = boxes = 0
    for c, g in zip(cases, got):
        want = [tv_eval(torch.tensor(c["rows"][:, :4], dtype=dt), c["W"], c["H"], c["s"], c["out_w"],
                        c["out_h"], c["flip"]) for dt in (torch.float64, torch.float32)]
        d64, d32, e = compare(c, g, *want, edge_ok=True)
        worst64, worst32 = max(worst64, d64), max(worst32, d32)
        edges, boxes = edges + e, boxes + len(c["rows"])
    print(f"\neval: {len(cases)} cases, {boxes} boxes ({edges} within {EDGE} px of no area, "
          f"either way right); largest difference {worst64:.3g} px (torchvision in float64), "
          f"{worst32:.3g} px (in float32, which resizes first: its coordinates up to "
          f"{max(c['big'] for c in cases):.0f})")


def test_clamp_is_torchvision_ops_clip_boxes_to_image():
    """The ported clamp is torchvision.ops' clip_boxes_to_image for XYXY."""
    g = torch.Generator().manual_seed(3)
    b = torch.rand(500, 4, generator=g, dtype=torch.float64) * 300 - 100
    for hw in [(100, 50), (1, 1), (37, 211)]:
        assert torch.equal(clamp_bounding_boxes(b, XYXY, hw), clip_boxes_to_image(b, hw))


def test_sanitize_differs():
    """Where torchvision's SanitizeBoundingBoxes and our rule part: its
    min_size (and from 0.21 min_area) must be >= 1, so a box under a pixel
    wide or high, or under a square pixel in area, goes there and stays
    here. Both drop x2 <= x1 or y2 <= y1; box_area alone would keep a box
    inverted on both axes."""
    boxes = torch.tensor([
        [10.0, 10.0, 10.5, 30.0],  # half a pixel wide
        [10.0, 10.0, 30.0, 10.25],  # a quarter high
        [10.0, 10.0, 10.9, 11.0],  # 0.9 px^2
        [10.0, 10.0, 12.0, 12.0],  # 2 x 2: kept by both
        [20.0, 20.0, 10.0, 10.0],  # inverted on both axes: positive box_area
        [10.0, 10.0, 10.0, 30.0],  # no width
    ], dtype=torch.float64)
    ours = no_area_rule(boxes)
    tv = _get_sanitize_bounding_boxes_mask(boxes, XYXY, (100, 100))
    assert ours.tolist() == [True, True, True, True, False, False]
    assert tv.tolist() == [False, False, False, True, False, False]
    assert (box_area(boxes) > 0).tolist() == [True, True, True, True, True, False]
    # and the program keeps what the rule keeps
    (got,) = run([(100, 100, (0, 0, 100, 100), False, boxes.numpy())])
    assert np.array_equal(got, boxes[ours].numpy().astype(np.float32))


def test_not_finite_is_refused_naming_the_row():
    rows = np.array([[1, 2, 3, 4], [1, 2, 3, 4], [1, np.inf, 3, 4]], dtype=np.float64)
    (got,) = run([(10, 10, (0, 0, 10, 10), False, rows)])
    assert isinstance(got, str) and "row 2" in got and "y1" in got, got
