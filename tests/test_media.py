"""Pictures read as a viewer shows them: every mode's file gives the plain RGB picture's pixels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from sage_core import media as media_module
from sage_core.errors import MediaError
from sage_core.media import MAX_FRAME_PIXELS, as_shown, image_media, load_media, thumbnail

SIZE = (48, 32)  # width, height: not square, so a wrong orientation shows


def scene() -> tuple[np.ndarray, np.ndarray]:
    """A white picture with a red disc low in the middle and a blue bar at the top left; and its mask."""
    height, width = SIZE[1], SIZE[0]
    ys, xs = np.mgrid[0:height, 0:width]
    disc = (xs - width // 2) ** 2 + (ys - height * 3 // 4) ** 2 <= 36
    bar = (ys < 5) & (xs < 20)
    pixels = np.full((height, width, 3), 255, dtype=np.uint8)
    pixels[disc] = (220, 30, 30)
    pixels[bar] = (30, 30, 200)
    return pixels, disc | bar


def plain() -> np.ndarray:
    return scene()[0]


def rgba_on_black() -> Image.Image:
    """The scene with a transparent background stored black (as many exporters and sketch pads write)."""
    pixels, mask = scene()
    rgba = np.zeros((*pixels.shape[:2], 4), dtype=np.uint8)
    rgba[mask, :3] = pixels[mask]
    rgba[mask, 3] = 255
    return Image.fromarray(rgba, "RGBA")


def grey_scene() -> np.ndarray:
    pixels = plain().astype(np.int32)
    return ((pixels[..., 0] * 299 + pixels[..., 1] * 587 + pixels[..., 2] * 114) // 1000).astype(np.uint8)


def read_back(tmp_path: Path, image: Image.Image, name: str, **save: object) -> np.ndarray:
    path = tmp_path / name
    image.save(path, **save)
    loaded = load_media(path)
    assert loaded.image is not None and loaded.image.mode == "RGB"
    return np.asarray(loaded.image)


def test_transparent_png_is_read_on_white(tmp_path: Path) -> None:
    assert np.array_equal(read_back(tmp_path, rgba_on_black(), "alpha.png"), plain())
    assert np.array_equal(np.asarray(image_media(rgba_on_black()).image), plain())


def test_la_picture_is_read_on_white(tmp_path: Path) -> None:
    grey = grey_scene()
    alpha = np.where(scene()[1], 255, 0).astype(np.uint8)
    la = Image.merge("LA", (Image.fromarray(np.where(alpha > 0, grey, 0)), Image.fromarray(alpha)))
    expected = np.stack([grey] * 3, axis=-1)
    assert np.array_equal(read_back(tmp_path, la, "la.png"), expected)


def test_palette_with_transparency_is_read_on_white(tmp_path: Path) -> None:
    pixels, mask = scene()
    index = np.zeros(mask.shape, dtype=np.uint8)  # 0: the clear background (stored black)
    index[mask & (pixels[..., 0] == 220)] = 1
    index[mask & (pixels[..., 2] == 200)] = 2
    palette = Image.fromarray(index, "P")
    palette.putpalette([0, 0, 0, 220, 30, 30, 30, 30, 200] + [0] * (253 * 3))
    assert np.array_equal(read_back(tmp_path, palette, "palette.png", transparency=0), plain())
    assert np.array_equal(read_back(tmp_path, palette, "palette.gif", transparency=0), plain())


def test_sixteen_bit_grey_is_scaled_not_clipped(tmp_path: Path) -> None:
    grey = grey_scene()
    wide = Image.fromarray(grey.astype(np.uint16) * 257)  # 16-bit grey, as scanners and medical exports write
    assert wide.mode.startswith("I;16")
    expected = np.stack([grey] * 3, axis=-1)
    assert np.array_equal(read_back(tmp_path, wide, "grey16.png"), expected)
    assert np.array_equal(np.asarray(image_media(wide).image), expected)
    assert np.array_equal(np.asarray(image_media(wide.convert("I")).image), expected)


def test_thirty_two_bit_grey_is_scaled_by_its_real_range(tmp_path: Path) -> None:
    """A 32-bit integer grey TIFF (mode I) beyond the 16-bit range: lowest black, highest white, as a viewer
    shows it (it read as a white picture when scaled as 16-bit)."""
    grey = grey_scene()
    deep = Image.fromarray(grey.astype(np.int32) * 8_000_000 - 1_000_000_000, "I")  # from -1e9 to about 1e9
    path = tmp_path / "grey32.tif"
    deep.save(path)
    assert Image.open(path).mode == "I"
    shown = np.asarray(load_media(path).image)[..., 0]
    low, high = grey.min(), grey.max()
    expected = np.round((grey.astype(np.float64) - low) * 255.0 / (high - low)).astype(np.uint8)
    assert np.abs(shown.astype(int) - expected).max() <= 1 and shown.min() == 0 and shown.max() == 255


@pytest.mark.parametrize(
    ("bits", "factor"), [(16, 257), (16, 256), (24, 65793), (24, 65536), (32, 2**23), (32, 8_421_504)]
)
def test_deep_grey_copies_read_as_their_eight_bit_picture(tmp_path: Path, bits: int, factor: int) -> None:
    """A 16-, 24- or 32-bit grey TIFF copy of an 8-bit picture (values up to 2**24 and beyond) reads as the
    8-bit picture, within 1: the copy up to 2**24 was stretched to its own range (its darkest grey black)."""
    grey = (grey_scene().astype(np.int32) * 180 // 255 + 30).astype(np.uint8)  # no black, no white
    assert grey.min() > 0 and grey.max() < 255  # (so a stretch to the data's own range would show)
    eight = Image.fromarray(grey)
    expected = np.asarray(as_shown(eight)).astype(int)
    deep = Image.fromarray(grey.astype(np.int32) * factor, "I")
    if bits == 16:
        deep = Image.fromarray((grey.astype(np.uint32) * factor).astype(np.uint16))
        assert deep.mode.startswith("I;16")
    path = tmp_path / f"grey{bits}.tif"
    deep.save(path)
    for read in (as_shown(Image.open(path)), load_media(path).image, image_media(deep).image):
        assert np.abs(np.asarray(read).astype(int) - expected).max() <= 1


def test_a_picture_named_as_a_video_is_read_as_the_picture_it_is(tmp_path: Path) -> None:
    """A PNG named `.mp4` was read as a one-frame video and told to "give a still as an image"."""
    path = tmp_path / "holiday.mp4"
    Image.fromarray(plain()).save(path, format="PNG")
    media = load_media(path)
    assert media.kind == "image" and media.name == "holiday.mp4"
    assert np.array_equal(np.asarray(media.image), plain())
    write_video(tmp_path / "clip.mp4", 64, 48)  # a video is still read as one
    assert load_media(tmp_path / "clip.mp4").kind == "video"


def test_exif_rotated_picture_is_read_as_shown(tmp_path: Path) -> None:
    stored = Image.fromarray(plain()).transpose(Image.Transpose.ROTATE_90)  # a phone's sensor-order pixels
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90° clockwise to show
    assert np.array_equal(read_back(tmp_path, stored, "rotated.png", exif=exif), plain())
    # a JPEG (lossy): read as shown, its pixels within JPEG noise of the plain picture
    shown = read_back(tmp_path, stored, "rotated.jpg", exif=exif, quality=95).astype(int)
    assert shown.shape == plain().shape
    assert np.abs(shown - plain()).mean() < 4


def test_cmyk_and_one_bit_pictures(tmp_path: Path) -> None:
    cmyk = Image.fromarray(plain()).convert("CMYK")
    assert np.array_equal(read_back(tmp_path, cmyk, "cmyk.tiff"), plain())
    black_white = np.where(scene()[1], 0, 255).astype(np.uint8)
    one_bit = Image.fromarray(black_white).convert("1")
    assert np.array_equal(read_back(tmp_path, one_bit, "onebit.png"), np.stack([black_white] * 3, axis=-1))


def write_video(path: Path, width: int, height: int, frames: int = 3) -> None:
    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 4.0, (width, height))
    for index in range(frames):
        writer.write(np.full((height, width, 3), 40 * index, dtype=np.uint8))
    writer.release()


def test_video_frames_are_capped_in_pixels(tmp_path: Path) -> None:
    path = tmp_path / "large.avi"
    write_video(path, 2400, 1600)
    video = load_media(path, frames=3)
    assert video.frames is not None
    count, height, width, _ = video.frames.shape
    assert count == 3 and height * width <= MAX_FRAME_PIXELS
    assert abs(width / height - 1.5) < 0.01  # aspect kept
    assert f"frames shrunk from 2400x1600 to {width}x{height} (the cap is 2,073,600 pixels a frame)" in video.describe()
    small = tmp_path / "small.avi"
    write_video(small, 64, 48)
    assert load_media(small, frames=2).frames.shape[1:3] == (48, 64)


def test_video_with_huge_frames_is_refused_before_decoding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "huge.avi"
    write_video(path, 320, 240, frames=2)
    monkeypatch.setattr(media_module, "MAX_VIDEO_FRAME_PIXELS", 320 * 240 - 1)
    with pytest.raises(MediaError, match="320x240 frames: too many pixels"):
        load_media(path, frames=2)


def test_thumbnail_is_small_and_keeps_the_aspect() -> None:
    image = image_media(Image.fromarray(np.zeros((600, 900, 3), dtype=np.uint8)))
    small = thumbnail(image, 150)
    assert small.image is not None and small.image.size == (225, 150)
    frames = np.zeros((4, 300, 400, 3), dtype=np.uint8)
    video = media_module.Media("video", "v", frames=frames, fps=4.0, total_frames=4, frame_indices=(0, 1, 2, 3))
    shrunk = thumbnail(video, 150)
    assert shrunk.frames is not None and shrunk.frames.shape == (4, 150, 200, 3)
    assert shrunk.frame_indices == video.frame_indices


def test_a_transparent_and_a_rotated_picture_get_the_plain_pictures_answer(tmp_path: Path, builtin_pair) -> None:
    """End to end with the built-in pair: the example on a transparent background (stored black), and
    stored rotated with an EXIF orientation, are answered token for token as the plain example."""
    from app.inputs import load_examples
    from sage_core import DecodeConfig, decode

    example = next(e for e in load_examples() if not e.is_video)
    shown = Image.open(example.file).convert("RGB")
    pixels = np.asarray(shown)
    background = (pixels > 245).all(axis=-1)  # the example's white background
    rgba = np.zeros((*pixels.shape[:2], 4), dtype=np.uint8)
    rgba[~background, :3] = pixels[~background]
    rgba[~background, 3] = 255
    Image.fromarray(rgba, "RGBA").save(tmp_path / "clear.png")
    exif = Image.Exif()
    exif[0x0112] = 6
    shown.transpose(Image.Transpose.ROTATE_90).save(tmp_path / "rotated.png", exif=exif)
    pair = builtin_pair

    def answer(path: str) -> tuple[int, ...]:
        return decode(pair, load_media(path), example.prompt, DecodeConfig("static", 16)).run_to_end().token_ids

    plain_answer = answer(example.file)
    assert answer(str(tmp_path / "rotated.png")) == plain_answer
    clear = load_media(tmp_path / "clear.png")
    assert clear.image is not None
    assert np.abs(np.asarray(clear.image).astype(int) - pixels).max() <= 10  # white again, up to the anti-aliasing
    assert answer(str(tmp_path / "clear.png")) == plain_answer
