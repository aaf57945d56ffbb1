"""Every setting of the library's table has three faces that must agree: the
string setter (gf_settings_set), the Python keyword and the CLI option of the
loader commands (`gpufeed settings`, which parses them as bench, verify and
train do). Each row is walked from the table itself, so a row added to it alone
is covered here: the same default, the same values accepted at its bounds and
spellings, the same refused with the same reason."""
import json
import math
import pathlib
import subprocess

import pytest

import gpufeed
from gpufeed import _gpufeed

from conftest import cli

TABLE = gpufeed.settings_table()


def option(name):
    return "--" + name.replace("_", "-")


def run_cli(*args):
    """(exit status, {setting: text} or None, stderr)."""
    p = subprocess.run([cli(), "settings", "--json", *args], capture_output=True, text=True)
    return p.returncode, json.loads(p.stdout) if p.returncode == 0 else None, p.stderr.strip()


def samples(row):
    """(text, Python value, accepted) at the row's bounds and just past them."""
    kind, lo, hi = row["type"], row["min"], row["max"]
    if kind == "choice":
        good = row["choices"] + row["aliases"]
        return [(c, c, True) for c in good] + [("nope", "nope", False)]
    if kind == "flag":
        return [("1", True, True), ("0", False, True)]
    if kind == "path":  # any text, "" too; str, bytes or os.PathLike in Python
        return [("/no/such/dir", pathlib.Path("/no/such/dir"), True), ("", "", True),
                ("rel ative", b"rel ative", True)]
    if kind == "text":  # any text, "" too (gf_open parses it); a str or a sequence of str
        return [("jpg,cls,txt", ("jpg", "cls", "txt"), True), ("", "", True),
                ("no spec", "no spec", True)]
    if kind in ("int", "u64"):
        if row["choices"]:  # the only values allowed (channels)
            return [(c, int(c), True) for c in row["choices"]] + [("2", 2, False)]
        out = [(str(lo), lo, True), (str(hi), hi, True),
               (str(lo - 1), lo - 1, lo - 1 == 0 and row["zero_picks"])]
        if hi < 2**64 - 1:
            out.append((str(hi + 1), hi + 1, False))
        return out
    # float, float4: finite bounds only (mean takes any finite number)
    out = [("nan", math.nan, False), ("inf", math.inf, False)]
    if lo > -1e30:
        out += [(repr(float(lo)), float(lo), not row["min_exclusive"]),
                (repr(float(lo - 1)), float(lo - 1), False)]
    if hi < 1e30:
        out += [(repr(float(hi)), float(hi), True), (repr(hi + 0.5), hi + 0.5, False)]
    return out


def keywords(name, value):
    kw = {name: value}  # mean=v, std=v: one number is every channel's, as --mean v
    if name == "rank":
        kw["world"] = 1 << 30  # a rank needs its world in Python
    return kw


def test_the_table_is_every_keyword_and_option():
    names = [row["name"] for row in TABLE]
    assert len(names) == len(set(names)) > 30
    rc, values, err = run_cli()
    assert rc == 0, err
    assert list(values) == names  # the CLI lists the table, in its order
    for row in TABLE:
        default = _gpufeed.get_setting(row["name"], {})
        assert values[row["name"]] == default, row["name"]
        if row["type"] in ("path", "text"):  # NULL by default: no text, None; zero says what
            assert row["default"] is None and default == "" and row["zero"], row
        else:
            assert _gpufeed.get_setting(row["name"], {row["name"]: row["default"]}) == default
        assert _gpufeed.get_setting(row["name"], gpufeed._settings({})) == default


@pytest.mark.parametrize("row", TABLE, ids=[row["name"] for row in TABLE])
def test_each_face_accepts_and_refuses_the_same(row):
    name = row["name"]
    for text, value, ok in samples(row):
        try:
            _gpufeed.check_setting(name, text)
            reason = None
        except ValueError as e:
            reason = str(e)
        assert (reason is None) == ok, (name, text, reason)
        rc, values, err = run_cli(f"{option(name)}={text}")
        if ok:
            assert rc == 0, (name, text, err)
            assert values[name] == _gpufeed.get_setting(name, {name: text}), (name, text)
        else:
            assert rc == 2, (name, text)
            assert reason.startswith(name + ": ")
            assert err == f"gpufeed settings: {option(name)}: {reason[len(name) + 2:]}"
        if isinstance(value, float) and math.isnan(value) or row["type"] == "flag" and not ok:
            continue  # Python's own spelling: repr(nan) is "nan" too, flags are bools
        if ok:
            fields = gpufeed._settings(keywords(name, value))
            assert _gpufeed.get_setting(name, fields) == values[name], (name, value)
        else:
            with pytest.raises(ValueError) as e:
                gpufeed._settings(keywords(name, value))
            assert str(e.value) == reason, (name, value)


def test_types_are_checked_by_the_tables_type():
    for row in TABLE:
        bad = {"choice": 1, "flag": "yes", "int": "8", "u64": 2.5, "float": "x",
               "float4": "x", "path": 5, "text": 5}[row["type"]]
        # a path's is os.fsdecode's own TypeError, as it has always been
        says = "os.PathLike" if row["type"] == "path" else row["name"]
        with pytest.raises(TypeError, match=says):
            gpufeed._settings(keywords(row["name"], bad))


def test_both_spellings_of_a_dtype():
    assert _gpufeed.get_setting("dtype", gpufeed._settings({"dtype": "f16"})) == "float16"
    assert _gpufeed.get_setting("dtype", gpufeed._settings({"dtype": "float16"})) == "float16"
    rc, values, _ = run_cli("--dtype", "float16")
    assert rc == 0 and values["dtype"] == "float16"
    rc, values, _ = run_cli("--dtype", "bf16")
    assert rc == 0 and values["dtype"] == "bfloat16"


def test_decode_image_checks_its_settings():
    with pytest.raises(ValueError, match="image_size: height: 60000 is out of range"):
        gpufeed.decode_image(b"\x89PNG", image_size=(60000, 60000))
    with pytest.raises(gpufeed.InvalidArgument, match="scale_min 0.9 is above scale_max 0.1"):
        gpufeed.decode_image(b"\x89PNG", scale=(0.9, 0.1))


def test_one_mean_or_std_is_every_channels():
    """A number applies to every channel, in Python, in C's string setter
    and on the CLI (--mean 128 once meant (128, 0, 0))."""
    want = "128,128,128,128"
    assert _gpufeed.get_setting("mean", gpufeed._settings({"mean": 128})) == want
    assert _gpufeed.get_setting("mean", {"mean": "128"}) == want
    rc, values, _ = run_cli("--mean", "128")
    assert rc == 0 and values["mean"] == want
    # a list sets channels in order (the CLI's "2,3" keeps the rest)
    assert _gpufeed.get_setting("std", gpufeed._settings({"std": (2, 3, 4)})) == "2,3,4,1"


@pytest.mark.parametrize("kw, says", [
    (dict(mean=(1, 2)), "mean: 2 values for 3 channels"),
    (dict(std=(1, 2, 3, 4)), "std: 4 values for 3 channels"),
    (dict(mean=[5.0], channels=1, std=(1, 2)), "std: 2 values for 1 channels"),
])
def test_a_list_of_another_length_than_channels_is_refused(kw, says):
    with pytest.raises(ValueError, match=says):
        gpufeed._settings(kw)
    gpufeed._settings({"mean": (1, 2, 3, 4), "std": 2, "channels": 4})  # 4 for 4 is fine


def test_torchvision_units_are_refused_with_the_numbers_to_pass():
    with pytest.raises(ValueError) as e:
        gpufeed._settings({"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)})
    msg = str(e.value)
    assert "0..255" in msg and "gpufeed.DataLoader" in msg
    assert "mean=(123.7, 116.3, 103.5)" in msg and "std=(58.4, 57.12, 57.38)" in msg
    with pytest.raises(ValueError, match="0..255"):
        gpufeed._settings({"mean": 0.5, "std": 0.5})
    # 0..255 values, and the identity, are taken
    gpufeed._settings({"mean": gpufeed.IMAGENET_MEAN, "std": gpufeed.IMAGENET_STD})
    gpufeed._settings({"mean": 0, "std": 1})
    gpufeed._settings({"std": 0.5})  # one alone is not a torchvision pair
