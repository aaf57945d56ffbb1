"""`python -m gpufeed run SCRIPT [ARGS...]`: runs an unmodified PyTorch script
with gpufeed.DataLoader in place of every torch DataLoader it can take.

torch.utils.data.DataLoader (and torch.utils.data.dataloader.DataLoader)
become a stand-in class: calling it makes gpufeed.DataLoader with the same
arguments, or, where gpufeed refuses them (gpufeed.Unsupported, or any
other error), torch's own DataLoader, which then takes or refuses them as
ever. Each loader says which it is on stderr when it is made.

What the script and its libraries can see is kept:
  * isinstance(x, torch.utils.data.DataLoader) and issubclass hold for
    torch's loaders and gpufeed's (the stand-in's metaclass asks torch's
    class);
  * the stand-in is a subclass of torch's class and adds nothing, so a
    script's `class MyLoader(DataLoader)` is torch's loader, as written
    (made as torch's, never gpufeed's; its line says so);
  * gpufeed.DataLoader is made from torch's own class before the names
    change, so it never inherits from the stand-in;
  * `DataLoader[T]` is torch's generic alias;
  * torch's own functions that name `DataLoader` in their module
    (DataLoader.__setattr__'s super(DataLoader, self)) keep meaning
    torch's class: they are rebound to a copy of the module's globals
    with the real class (taken when the names change).
"""
import sys
import types

from . import _script

USAGE = "usage: python -m gpufeed run SCRIPT [ARGS...]"


def _say(frame, name, dataset, which):
    sys.stdout.flush()
    print(f"gpufeed run: {name} at {_script.site(frame)} ({_script.dataset_words(dataset)}): "
          f"{which}", file=sys.stderr, flush=True)


def _stand_in(real, gpufeed_cls):
    """The class that takes torch's DataLoader's names."""
    from .dataloader import Unsupported

    class Meta(type(real)):
        def __call__(cls, *args, **kwargs):
            frame = sys._getframe(1)
            dataset = args[0] if args else kwargs.get("dataset")
            if cls is not stand_in:  # a script's subclass: torch's, as it wrote it
                loader = super().__call__(*args, **kwargs)
                _say(frame, cls.__name__, dataset,
                     "torch's (a subclass of DataLoader, the script's own: left as it is)")
                return loader
            try:
                loader = gpufeed_cls(*args, **kwargs)
            except Unsupported as e:
                why = str(e)
            except Exception as e:  # torch decides: it takes them, or raises its own error
                why = f"{type(e).__name__}: {e}"
            else:
                _say(frame, "DataLoader", dataset, "gpufeed")
                return loader
            loader = real(*args, **kwargs)
            _say(frame, "DataLoader", dataset, f"torch's (gpufeed cannot take it: {why})")
            return loader

        def __instancecheck__(cls, obj):
            if cls is stand_in:
                return isinstance(obj, real)
            return super().__instancecheck__(obj)

        def __subclasscheck__(cls, sub):
            if cls is stand_in:
                return issubclass(sub, real)
            return super().__subclasscheck__(sub)

    def __class_getitem__(cls, params):
        return real[params] if cls is stand_in else super(stand_in, cls).__class_getitem__(params)

    stand_in = Meta(real.__name__, (real,), {
        "__module__": real.__module__, "__qualname__": real.__qualname__,
        "__doc__": real.__doc__, "__class_getitem__": classmethod(__class_getitem__),
        "_gpufeed_torch_class": real})
    return stand_in


def _keep_real(module, name, real):
    """The module's functions that look `name` up as a global (torch's
    DataLoader.__setattr__: super(DataLoader, self)) keep finding real."""
    snapshot = None
    for cls in [v for v in vars(module).values() if isinstance(v, type)
                and v.__module__ == module.__name__]:
        for attr, fn in list(vars(cls).items()):
            if isinstance(fn, types.FunctionType) and name in fn.__code__.co_names:
                if snapshot is None:
                    snapshot = dict(vars(module))
                    snapshot[name] = real
                copy = types.FunctionType(fn.__code__, snapshot, fn.__name__, fn.__defaults__,
                                          fn.__closure__)
                copy.__kwdefaults__ = fn.__kwdefaults__
                copy.__dict__.update(fn.__dict__)
                copy.__qualname__ = fn.__qualname__
                setattr(cls, attr, copy)


def patch():
    import torch.utils.data
    import torch.utils.data.dataloader as tdl
    real = tdl.DataLoader
    if getattr(real, "_gpufeed_torch_class", None) is not None:
        return real  # patched already
    import gpufeed
    gpufeed_cls = gpufeed.DataLoader  # made now, from torch's own class
    assert real in gpufeed_cls.__mro__
    stand_in = _stand_in(real, gpufeed_cls)
    _keep_real(tdl, "DataLoader", real)
    torch.utils.data.DataLoader = stand_in
    tdl.DataLoader = stand_in
    return stand_in


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    patch()
    return _script.run(argv[0], argv[1:], lambda: None)
