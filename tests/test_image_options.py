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
