"""ImageOptions: the image options checked once, as the public constructors name them."""

import pytest

from kerasgen.loading.options import ImageOptions


def test_options_are_checked_once_and_frozen():
    options = ImageOptions(image_size=[10, 12], rescale=1 / 255, decode_threads=2)
    assert options.image_size == (10, 12) and options.aspect is None
    assert options.loader_kwargs("uint16")["bit_depth"] == 16
    with pytest.raises(Exception):
        options.image_size = (1, 1)
    with pytest.raises(ValueError, match="Only one of"):
        ImageOptions(crop_to_aspect_ratio=True, pad_to_aspect_ratio=True)
    with pytest.raises(ValueError, match="on_error"):
        ImageOptions(on_error="ignore")
    with pytest.raises(ValueError, match="rescale"):
        ImageOptions(rescale=0)


def test_take_removes_the_options_from_the_keywords():
    keywords = {"image_size": (5, 5), "batch_size": 3, "cache": "memory"}
    options = ImageOptions.take(keywords, {"cache": None, "verbose": 0})
    assert keywords == {"batch_size": 3}
    assert (options.image_size, options.cache, options.verbose) == ((5, 5), "memory", 0)
    assert options.replace(color_mode="grayscale").color_mode == "grayscale"


# ----------------------------------------------------------------- no import circle
def _import_circles():
    """The strongly connected sets (of two modules or more) of kerasgen's run-time
    imports (`tests.test_dropin._kerasgen_imports`: TYPE_CHECKING blocks left out)."""
    from tests.test_dropin import _kerasgen_imports, _modules

    modules = _modules()
    graph = {name: sorted(_kerasgen_imports(path, modules) & set(modules) - {name})
             for name, path in modules.items()}
    order, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(start):  # Tarjan's algorithm, without recursion
        work = [(start, iter(graph[start]))]
        order[start] = low[start] = len(order)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in order:
                    order[child] = low[child] = len(order)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], order[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    circles.append(sorted(members))

    for name in sorted(graph):
        if name not in order:
            visit(name)
    return circles


def test_no_import_circle_among_kerasgen_modules():
    assert _import_circles() == []
