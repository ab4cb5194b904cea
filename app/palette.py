"""One colour-blind-safe palette for every panel (Okabe & Ito, "Color Universal Design", 2008),
and the arithmetic that checks it: colour-vision deficiencies simulated with Machado, Oliveira &
Fernandes (2009), distances measured with CIEDE2000 in CIELAB.

Colour is never the only cue: each series also has its own line dash and marker (`SERIES`); a method's
colour, dash and marker are its registry entry's (`MethodSpec`), in one place.
`tests/test_palette.py` asserts that the series drawn together stay at least `MIN_DELTA_E` apart
for normal vision, protanopia, deuteranopia, tritanopia and a washed-out projector.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Okabe-Ito
BLACK = "#000000"
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
BLUISH_GREEN = "#009E73"
YELLOW = "#F0E442"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
REDDISH_PURPLE = "#CC79A7"
GREY = "#8C8C8C"  # guides: deliberately quiet

#: The tree and the texts: the accepted path, the target's bonus token, rejected nodes, cut candidates.
ACCEPTED = BLUISH_GREEN
BONUS = ORANGE
REJECTED = "#C8C8C8"
CUT = "#5A5A5A"


@dataclass(frozen=True)
class Series:
    """How one series is drawn: a colour, a line dash and a marker (the second cue)."""

    colour: str
    dash: str
    marker: str


#: Panel ①'s series, by what they show.
SERIES: dict[str, Series] = {
    "entropy": Series(ORANGE, "dash", "hexagon"),
    "alpha": Series(BLUE, "solid", "circle"),
    "depth": Series(VERMILLION, "solid", "triangle-up"),
    "width": Series(BLUISH_GREEN, "dashdot", "square"),
    "depth_max": Series(BLACK, "dot", "line-ew"),
    "window": Series(SKY_BLUE, "solid", "diamond"),
}
#: The smallest CIEDE2000 distance allowed between two series drawn together, under every condition.
MIN_DELTA_E = 12.0

# Machado et al. (2009), severity 1.0, applied to linear RGB.
MACHADO: dict[str, tuple[tuple[float, float, float], ...]] = {
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602), (0.004733, 0.691367, 0.303900)),
}
#: A projector in a lit room: every colour mixed this much with white.
WASHED_OUT = 0.3
CONDITIONS = ("normal", *MACHADO, "washed-out")

RGB = tuple[float, float, float]


def rgb(hex_colour: str) -> RGB:
    """'#rrggbb' as sRGB in [0, 1]."""
    value = hex_colour.lstrip("#")
    return (int(value[0:2], 16) / 255, int(value[2:4], 16) / 255, int(value[4:6], 16) / 255)


def _linear(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _gamma(c: float) -> float:
    c = min(1.0, max(0.0, c))
    return 12.92 * c if c <= 0.0031308 else 1.055 * c ** (1 / 2.4) - 0.055


def seen(hex_colour: str, condition: str) -> RGB:
    """The sRGB colour as seen under `condition` (one of `CONDITIONS`)."""
    colour = rgb(hex_colour)
    if condition == "normal":
        return colour
    if condition == "washed-out":
        r, g, b = colour
        return (r + (1 - r) * WASHED_OUT, g + (1 - g) * WASHED_OUT, b + (1 - b) * WASHED_OUT)
    matrix = MACHADO[condition]
    lin = [_linear(c) for c in colour]
    out = [sum(m * c for m, c in zip(row, lin, strict=True)) for row in matrix]
    return (_gamma(out[0]), _gamma(out[1]), _gamma(out[2]))


def lab(colour: RGB) -> RGB:
    """sRGB (D65) to CIELAB."""
    r, g, b = (_linear(c) for c in colour)
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    fx, fy, fz = f(x), f(y), f(z)
    return (116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz))


def ciede2000(lab1: RGB, lab2: RGB) -> float:
    """The CIEDE2000 colour difference (Sharma, Wu & Dalal 2005), kL = kC = kH = 1."""
    l1, a1, b1 = lab1
    l2, a2, b2 = lab2
    c_bar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_bar**7 / (c_bar**7 + 25**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = math.degrees(math.atan2(b2, a2p)) % 360 if c2p else 0.0
    dlp, dcp = l2 - l1, c2p - c1p
    dh = h2p - h1p
    if c1p * c2p == 0:
        dh = 0.0
    elif dh > 180:
        dh -= 360
    elif dh < -180:
        dh += 360
    dhp = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh / 2))
    lp_bar, cp_bar = (l1 + l2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        hp_bar = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        hp_bar = (h1p + h2p) / 2
    else:
        hp_bar = (h1p + h2p + 360) / 2 if h1p + h2p < 360 else (h1p + h2p - 360) / 2
    t = (
        1
        - 0.17 * math.cos(math.radians(hp_bar - 30))
        + 0.24 * math.cos(math.radians(2 * hp_bar))
        + 0.32 * math.cos(math.radians(3 * hp_bar + 6))
        - 0.20 * math.cos(math.radians(4 * hp_bar - 63))
    )
    d_theta = 30 * math.exp(-(((hp_bar - 275) / 25) ** 2))
    r_c = 2 * math.sqrt(cp_bar**7 / (cp_bar**7 + 25**7))
    s_l = 1 + 0.015 * (lp_bar - 50) ** 2 / math.sqrt(20 + (lp_bar - 50) ** 2)
    s_c = 1 + 0.045 * cp_bar
    s_h = 1 + 0.015 * cp_bar * t
    r_t = -math.sin(math.radians(2 * d_theta)) * r_c
    return math.sqrt((dlp / s_l) ** 2 + (dcp / s_c) ** 2 + (dhp / s_h) ** 2 + r_t * (dcp / s_c) * (dhp / s_h))


def delta_e(first: str, second: str, condition: str = "normal") -> float:
    """How far apart two colours look under `condition` (CIEDE2000)."""
    return ciede2000(lab(seen(first, condition)), lab(seen(second, condition)))
