#!/usr/bin/env python3
"""cudaemu: a .cu file as C++ for the CPU emulation.

Rewrites the two things a C++ compiler cannot parse, keeping every line
where it was (so compiler messages and debuggers point at the .cu file):
  kernel<<<grid, block, shared, stream>>>(args)
      -> ::gf_cudaemu::launcher(grid, block, shared, stream).run("kernel", kernel, args)
  extern __shared__ T name[];
      -> T *name = (T *)::gf_cudaemu::dynamic_shared();
  __shared__ T name[A][B];
      -> a reference to the block's own copy, poisoned when the block starts
"""
import re
import sys

LAUNCH = re.compile(r"\b([A-Za-z_]\w*(?:<[^<>;()]*>)?)\s*<<<(.*?)>>>\s*\(\s*(\)?)")
EXTERN_SHARED = re.compile(r"\bextern\s+__shared__\s+([\w:\s]+?)\s*(\w+)\s*\[\s*\]\s*;")
STATIC_SHARED = re.compile(r"\b__shared__\s+([A-Za-z_][\w:]*(?:\s+[A-Za-z_][\w:]*)*?)\s+(\w+)\s*((?:\[[^\]]+\])+)\s*;")


def launch(m):
    kernel, config, no_args = m.group(1), m.group(2), m.group(3)
    head = f'::gf_cudaemu::launcher({config}).run("{kernel}", {kernel}'
    return head + (")" if no_args else ", ")


def main():
    src, dst = sys.argv[1], sys.argv[2]
    text = open(src, encoding="utf-8").read()
    text, launches = LAUNCH.subn(launch, text)
    text = EXTERN_SHARED.sub(
        lambda m: f"{m.group(1)} *{m.group(2)} = ({m.group(1)} *)::gf_cudaemu::dynamic_shared();",
        text)
    text = STATIC_SHARED.sub(
        lambda m: (f"static thread_local ::gf_cudaemu::shared_site gf_site_{m.group(2)}; "
                   f"auto &{m.group(2)} = *static_cast<{m.group(1)}(*){m.group(3)}>("
                   f"gf_site_{m.group(2)}.get(sizeof({m.group(1)}{m.group(3)})));"),
        text)
    if "<<<" in text:
        line = text[: text.index("<<<")].count("\n") + 1
        sys.exit(f"{src}:{line}: cu2cpp: a launch it cannot rewrite")
    with open(dst, "w", encoding="utf-8") as out:
        out.write(f'#line 1 "{src}"\n{text}')


if __name__ == "__main__":
    main()
