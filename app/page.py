"""The page's layout: every component, made once and held by name in a `Page`.

Handlers (`app/handlers.py`) answer with updates keyed by these components
(never by position), and `app/ui.py` wires the events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from sage_core.config import MAX_TEMPERATURE
from sage_core.methods import MethodSpec, Setting, specs
from sage_core.methods.builtin import RACE_DEFAULT

from .gradio_patches import around_preprocess
from .inputs import DEFAULT_PROMPT, SECOND_DRAFT_CHOICES, Example, Limits, race_fields
from .panel_table import Panel, panel_table, placed
from .pruning_panel import draft_view_outputs, pruning_controls
from .render import CSS, badge_html, race_html, status_html
from .sketch import sketch_pad

DEFAULT_METHODS: list[str] = list(RACE_DEFAULT)  # the design's race: SAGE against the static tree
DEFAULT_MAX_NEW_TOKENS = 128
TITLE = "SAGE: entropy-guided adaptive speculative decoding, raced live"
EXAMPLES_NOTE = (
    "<div class='sage-wrap' style='font-size:13px;color:#475569;margin:2px 0 -4px 2px'><b>Examples</b>: click one "
    "(each comes with a suggested prompt)</div>"
)
INTRO = f"""
<div class='sage-wrap'>
<h1 style='margin:0 0 4px 0;font-size:26px'>{TITLE}</h1>
<p style='margin:0;color:#475569;font-size:14px'>A small <b>draft</b> VLM proposes a tree of tokens; the large
<b>target</b> VLM checks the whole tree in one forward and keeps the longest path it agrees with, plus one token of its
own. <b>SAGE</b> (<a href='https://arxiv.org/abs/2602.00523' target='_blank'>arXiv 2602.00523</a>) shapes each tree
from the draft's confidence: deep and narrow when sure, shallow and wide when not.<span class='sage-intro-more'> Here it
races the static 25-node tree (and optionally a 5-token chain and plain decoding) on the same device, step by step;
every number comes from this run's own timed steps. The output must equal the target's own greedy decoding.</span></p>
</div>
"""


EXPLAIN_EMPTY = (
    "<div style='font:13px Inter,system-ui,sans-serif;color:#64748b'>The explainer: pick a round of a race (or press "
    "<b>▶| Step</b> to go one round at a time) and this panel fills in the paper's formulas with that round's own "
    "numbers.</div>"
)
#: A stepped race is dropped this many seconds after the visitor's last step (its caches with it).
STEPPER_TTL = 900
#: The button that steps through the teaching recording (app/teaching.py).
TEACHING_BUTTON = "▶| Step through a recording where the draft hesitates"
#: A race's records (what the panels redraw from) are dropped this many seconds after its last update.
STATE_TTL = 3600
#: What to look for in the explainer (each panel's own help is its row of `panel_table`): folded away under it.
EXPLAIN_HELP = (
    "The round in numbers: the draft's top-10, H and α, D(α) and W(α) rounded as the code rounds them, each level's "
    "width W_l and threshold θ_l with how many candidates each rule cut, then the target's check of every node it "
    "reached. Every number is read from the round's record."
)
#: Keys, unless the visitor is typing in a field: → steps the race (or the replay last stepped), s starts a
#: race, t switches the talk view. A control that takes no typing (a method's checkbox, a button, a radio)
#: keeps the keys working once clicked, except the arrows on a radio, which move its choice.
KEYBOARD_JS = """
<script>
document.addEventListener('click', (e) => {
  const b = e.target.closest && e.target.closest('#step-round, #step-replay');
  if (b) window.sageStepTarget = b.id;
}, true);
document.addEventListener('keydown', (e) => {
  if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
  const t = e.target;
  const clicks = ['checkbox', 'radio', 'button', 'submit', 'reset', 'color', 'file'];
  const typing = t && (t.isContentEditable || ['TEXTAREA', 'SELECT'].includes(t.tagName) ||
    (t.tagName === 'INPUT' && !clicks.includes(t.type)));
  if (typing || (t && t.type === 'radio' && e.key.startsWith('Arrow'))) return;
  const id = {ArrowRight: window.sageStepTarget || 'step-round', s: 'start-race', t: 'talk-toggle'}[e.key];
  const b = id && document.getElementById(id);
  if (b && !b.disabled) { e.preventDefault(); b.click(); }
});
</script>
"""
#: The Draw tab is ready to draw on arrival: the pad's brush is picked the first time the pad shows (once a
#: page: a visitor who then picks the eraser keeps it).
DRAW_JS = """
<script>
(() => {
  const ready = setInterval(() => {
    const pad = document.getElementById('sketch');
    const brush = pad && pad.offsetParent && pad.querySelector('button[aria-label=Brush]');
    if (!brush) return;
    if (!brush.classList.contains('highlight')) brush.click();
    clearInterval(ready);
  }, 300);
})();
</script>
"""
#: The talk view: `?view=talk` (or the toggle, or t) pins the two texts, the speedup and the badge, panel ①
#: and the round's tree to one 1280 x 720 screen; the rest of the page is hidden. Plotly panels keep the
#: height the server drew them at, so the view refits them to their boxes (and gives it back after).
TALK_JS = """
<script>
(() => {
  const FIT = ['panel-confidence', 'panel-tree'];
  const talking = () => document.body.classList.contains('sage-talk');
  function fit() {
    if (!window.Plotly) return;
    for (const id of FIT) {
      const box = document.getElementById(id);
      const gd = box && box.querySelector('.js-plotly-plot');
      if (!gd || !gd._fullLayout) continue;
      if (talking()) {
        const h = Math.floor(box.clientHeight), w = Math.floor(box.clientWidth);
        if (h < 50 || w < 50) continue;
        if (Math.abs(gd._fullLayout.height - h) > 3 || Math.abs(gd._fullLayout.width - w) > 3) {
          if (gd.dataset.sageHeight === undefined) gd.dataset.sageHeight = gd.layout.height || '';
          window.Plotly.relayout(gd, {height: h, width: w});
          continue;  // (the rest once it is drawn at its box's size: the next look)
        }
        // The cut candidates keep their markers (hover names them) but not their labels: too dense to read.
        const cut = gd.data.flatMap((t, i) => (t.name === 'cut' && t.mode !== 'markers' ? [i] : []));
        if (cut.length) window.Plotly.restyle(gd, {mode: 'markers'}, cut);
        roomy(gd);
      } else if (gd.dataset.sageHeight !== undefined) {
        const h = gd.dataset.sageHeight;
        delete gd.dataset.sageHeight;
        const kept = JSON.parse(gd.dataset.sageKept || '{}');
        delete gd.dataset.sageKept;
        window.Plotly.relayout(gd, {...kept, height: h ? Number(h) : null, width: null});
        const cut = gd.data.flatMap((t, i) => (t.name === 'cut' ? [i] : []));
        if (cut.length) window.Plotly.restyle(gd, {mode: 'markers+text'}, cut);
      }
    }
  }
  // A talk-view panel's plot gets the room the server kept for a narrower legend (the top margin shrinks to
  // the title and the legend as drawn), and each y axis no more ticks than its height holds (a row of 45 px
  // printed 0 to 4 on top of one another): one tick per 30 px. What it changed is given back after.
  function roomy(gd) {
    const full = gd._fullLayout, svg = gd.querySelector('.main-svg'), title = gd.querySelector('.gtitle');
    if (!svg || !title) return;
    const top = svg.getBoundingClientRect().top, legend = gd.querySelector('.legend');
    const legendHeight = legend ? legend.getBoundingClientRect().height : 0;
    const wanted = Math.ceil(title.getBoundingClientRect().bottom - top + 8 + legendHeight + 4);
    const change = {};
    if (full.margin.t - wanted > 4) change['margin.t'] = wanted;
    for (const name of Object.keys(full).filter(k => /^yaxis\\d*$/.test(k))) {
      const axis = full[name];
      const own = gd.layout[name] || {};  // (an axis whose ticks the server chose keeps them)
      if (!axis.visible || own.tickvals || own.dtick !== undefined) continue;
      const most = Math.max(2, Math.floor(axis._length / 30));
      if (axis.nticks !== most) change[name + '.nticks'] = most;
    }
    if (!Object.keys(change).length) return;
    const kept = JSON.parse(gd.dataset.sageKept || '{}');
    for (const key of Object.keys(change)) {
      const axis = gd.layout[key.split('.')[0]] || {};
      if (!(key in kept)) kept[key] = key === 'margin.t' ? full.margin.t : axis.nticks ?? 0;
    }
    gd.dataset.sageKept = JSON.stringify(kept);
    window.Plotly.relayout(gd, change);
  }
  // In the talk view each side's whole answer is on screen: its type shrinks (18 px down to 12 px) until the
  // text fits its box; an answer longer than even that follows its newest tokens, its box a whole number of
  // lines tall so that the top line is never sliced.
  const FONT_MAX = 18, FONT_MIN = 12;
  const follow = () => {
    const texts = document.querySelectorAll('#lanes .sage-text');
    if (!talking()) { for (const t of texts) { t.style.fontSize = ''; t.style.maxHeight = ''; } return; }
    const bottom = document.getElementById('lanes').getBoundingClientRect().bottom;
    for (const t of texts) {
      // the box ends where the lanes do, however many lines the lane's stats took (five lanes: narrow ones)
      t.style.maxHeight = Math.max(40, bottom - t.getBoundingClientRect().top - 8) + 'px';
      const over = () => t.scrollHeight > t.clientHeight + 1;
      let size = parseFloat(t.style.fontSize) || FONT_MAX;
      while (size < FONT_MAX && !over()) {  // room again (a new race, a shorter text): grow back
        t.style.fontSize = (size + 1) + 'px';
        if (over()) { t.style.fontSize = size + 'px'; break; }
        size += 1;
      }
      while (size > FONT_MIN && over()) { size -= 1; t.style.fontSize = size + 'px'; }
      if (over()) {
        const line = parseFloat(getComputedStyle(t).lineHeight) || size * 1.45;
        const room = parseFloat(t.style.maxHeight);
        t.style.maxHeight = Math.max(line, Math.floor(room / line) * line) + 'px';
        t.scrollTop = t.scrollHeight;
      }
    }
  };
  window.sageTalk = (on) => {
    on = on === undefined ? !talking() : on;
    document.body.classList.toggle('sage-talk', on);
    if (on) window.scrollTo(0, 0);
    const url = new URL(window.location.href);
    if (on) url.searchParams.set('view', 'talk'); else url.searchParams.delete('view');
    window.history.replaceState(null, '', url);
    setTimeout(fit, 50);
  };
  const start = () => {
    if (new URLSearchParams(window.location.search).get('view') === 'talk') window.sageTalk(true);
    setInterval(() => { fit(); follow(); }, 300);
  };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start); else start();
})();
</script>
"""
#: The page's own layout rules (Gradio's `css_template` scopes CSS to one component; these span the page).
PAGE_CSS = """
<style>
#sage-controls button { font-size: 15px; }
#figures-table, #explain { overflow-x: auto; max-width: 100%; }
.sage-i { display: inline-block; width: 1.15em; height: 1.15em; line-height: 1.1em; border: 1.5px solid currentColor;
  border-radius: 50%; text-align: center; font: italic 700 0.85em Georgia, serif; box-sizing: border-box; }
/* whole words, never an ellipsis: the examples' questions and the pad's label wrap ("describe t…", "…triar") */
#examples .caption-label { white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
  line-height: 1.2; }
#sketch label, #sketch [data-testid=block-label] { white-space: normal !important; overflow: visible !important;
  text-overflow: clip !important; max-width: none !important; }
#panel-confidence, #panel-tree { min-height: 120px; }
/* The modebar (download, zoom) in a strip of its own above each panel, never over its title. */
[id^=panel-] .js-plotly-plot { margin-top: 28px; }
[id^=panel-] .js-plotly-plot .modebar-container { top: -28px !important; }
body.sage-talk { overflow: hidden; }
body.sage-talk gradio-app, body.sage-talk footer { visibility: hidden; }
body.sage-talk #sage-controls, body.sage-talk #status, body.sage-talk #verdict, body.sage-talk #lanes,
body.sage-talk #panel-confidence, body.sage-talk #panel-tree {
  visibility: visible; position: fixed; z-index: 50; margin: 0; background: #fff; box-sizing: border-box;
  width: auto !important; min-width: 0 !important; max-width: none !important;
}
body.sage-talk #sage-controls { top: 6px; left: 8px; right: 60vw; height: 48px; flex-wrap: nowrap; gap: 6px; }
body.sage-talk #sage-controls button {
  visibility: visible; font-size: 15px; padding: 4px 6px; min-width: 0 !important; white-space: nowrap;
  flex: 0 1 auto !important; width: auto !important;
}
body.sage-talk #sage-controls #start-race { flex: 1 0 auto !important; }
body.sage-talk #status { top: 56px; left: 8px; right: 60vw; height: 68px; overflow-y: auto; }
body.sage-talk #status .sage-status { font-size: 12.5px; line-height: 1.3; padding: 3px 10px; }
body.sage-talk #status .sage-status-detail, body.sage-talk #status .sage-why-line { display: none; }
body.sage-talk #status .sage-why-brief { display: inline; }  /* a finished race: its why, briefly */
body.sage-talk #status .sage-wrap:has(~ .sage-wrap) { display: none; }  /* the last status only (a landing's lead) */
body.sage-talk #verdict { top: 6px; left: calc(40vw + 16px); right: 8px; height: 96px; overflow: hidden; }
body.sage-talk #verdict .sage-headline { font-size: 16px; margin: 0 0 4px 0; line-height: 1.2; }
body.sage-talk #verdict .sage-headline div.sage-headline-note { display: none; }  /* details; verdict, replay stay */
body.sage-talk #verdict .sage-badge { font-size: 15px; padding: 4px 10px; white-space: normal; }  /* whole */
body.sage-talk #verdict .sage-badge small { display: none; }
body.sage-talk #lanes { top: 126px; left: 8px; right: 8px; height: calc(44vh - 126px); overflow: hidden; }
body.sage-talk #lanes .sage-legend { display: none; }
body.sage-talk #lanes .sage-col { padding: 6px 10px; }
body.sage-talk #lanes .sage-stats { margin-bottom: 2px; }
body.sage-talk #lanes .sage-sub { display: none; }
body.sage-talk #lanes .sage-text { font-size: 18px; line-height: 1.45; max-height: calc(44vh - 208px); }
/* a lane's head on one line and its two figures a speaker reads (τ, tokens/s): the rest is the table's, and the
   room goes to the whole answer (rounds, draft forwards, tokens/forward and time hidden: first, third, third from
   the end and last of the stats, with or without the draft forwards) */
body.sage-talk #lanes .sage-col h3 { flex-wrap: nowrap; white-space: nowrap; overflow: hidden; font-size: 15px; }
body.sage-talk #lanes .sage-col h3 .sage-tag.done { display: none; }
body.sage-talk #lanes .sage-stats { flex-wrap: nowrap; gap: 2px 10px; }
body.sage-talk #lanes .sage-stats > span:first-child, body.sage-talk #lanes .sage-stats > span:nth-child(3),
body.sage-talk #lanes .sage-stats > span:nth-last-child(3), body.sage-talk #lanes .sage-stats > span:last-child {
  display: none;
}
body.sage-talk #lanes .sage-text { font-family: Inter, system-ui, sans-serif; }
body.sage-talk #panel-confidence { top: calc(44vh + 4px); left: 8px; right: 58vw; bottom: 6px; }
body.sage-talk #panel-tree { top: calc(44vh + 4px); left: 42vw; right: 8px; bottom: 6px; }
body.sage-talk #panel-confidence .modebar-container, body.sage-talk #panel-tree .modebar-container {
  display: none;
}
body.sage-talk #panel-confidence .js-plotly-plot, body.sage-talk #panel-tree .js-plotly-plot { margin-top: 0; }
@media (max-width: 700px) {
  #intro h1 { font-size: 20px !important; }
  #intro p { font-size: 13px !important; }
  #intro .sage-intro-more { display: none; }  /* (the race says it again, beside Start and under the badge) */
  .gradio-container { padding-left: 8px !important; padding-right: 8px !important; }
  #sage-controls { flex-wrap: wrap; }
  .sage-table { display: block; overflow-x: auto; }
  /* a phone's page stays a few screens long: the long blocks scroll in boxes of their own */
  #explain, #figures-table, #sage-settings { overflow-y: auto !important; }
  #explain { max-height: 340px; }
  #sage-settings { max-height: 340px; flex-wrap: nowrap; }
  #sage-settings > * { flex-shrink: 0; }
  .sage-tour { display: none !important; }  /* (the panels' tour notes: on a larger screen) */
  #step-teaching { display: none !important; }  /* (the teaching recording: on a larger screen) */
  #lanes .sage-col { align-self: start; }
  #figures-table { max-height: 300px; }
  #lanes .sage-text { max-height: 150px; }
  #methods { max-height: 200px; overflow-y: auto !important; }
  #status { max-height: 200px; overflow-y: auto !important; }
  #verdict .sage-rivals { max-height: 140px; overflow-y: auto; }  /* the headline itself is read whole */
  #lanes { max-height: 560px; overflow-y: auto !important; }
  [id^=panel-] { max-height: 380px; overflow-y: auto !important; }
  [id^=panel-] .modebar-container { display: none; }
  [id^=panel-] .js-plotly-plot { margin-top: 0; }
}
</style>
"""
#: Everything the page adds to its <head>.
HEAD = KEYBOARD_JS + TALK_JS + DRAW_JS + PAGE_CSS


def _plot(panel: Panel) -> gr.Plot:
    """A Plotly panel (`#panel-<name>`), its help folded under it."""
    plot = gr.Plot(show_label=False, elem_id=panel.element_id)
    _tour(panel.help)
    return plot


def _panel(panel: Panel) -> gr.Plot:
    """A Plotly panel in its own column, its help folded under it."""
    with gr.Column(min_width=300):
        return _plot(panel)


def sweep_outputs() -> tuple[gr.Button, gr.HTML, gr.Plot]:
    """The budget sweep's button, its note and its figure, folded (sage_core/studies/sweep_figure.py)."""
    with gr.Accordion("The budget sweep of this pair: τ and speed against the node budget", open=False):
        show = gr.Button(
            "Measure the sweep for the chosen pair (seconds on a CPU, once per pair)", size="sm", elem_id="sweep-show"
        )
        note = _html("", elem_id="sweep-note")
        plot = gr.Plot(show_label=False, elem_id="panel-sweep")
    return show, note, plot


def _tour(help: str) -> None:
    with gr.Accordion("What to look for", open=False, elem_classes=["sage-tour"]):
        gr.Markdown(help)


def image_input(**kwargs: Any) -> gr.Image:
    """An image input that hands the uploaded file to the app unopened.

    The stock component opens the file with PIL first, so a corrupt upload
    would fail inside Gradio with no useful message; the app checks the file
    itself (`inputs.open_media`) and says what is wrong.
    """

    def preprocess(stock: Any, payload: Any) -> Any:
        if payload is not None and getattr(payload, "path", None):
            return str(payload.path)
        return stock(payload)

    return around_preprocess(lenient(gr.Image(type="filepath", **kwargs)), preprocess)


def lenient(component: Any) -> Any:
    """An input whose odd values ("abc", out of range, null, a choice not listed, a file that is not one)
    reach the handler, which says what is wrong (Gradio's own check would answer an API caller with a
    bare "Error")."""

    def preprocess(stock: Any, payload: Any) -> Any:
        try:
            return stock(payload)
        except Exception:
            return payload

    return around_preprocess(component, preprocess)


def setting_control(spec: MethodSpec, setting: Setting) -> Any:
    """A method's setting as a control (its registry entry's: range, default, label): a slider, or a
    dropdown of its choices."""
    value = getattr(spec.default_settings(), setting.field)
    if setting.choices:
        return gr.Dropdown(list(setting.choices), value=value, label=setting.label)
    step = 1 if setting.whole else (setting.high - setting.low) / 100
    return gr.Slider(setting.low, setting.high, value=value, step=step, label=setting.label)


def settings_controls() -> dict[str, Any]:
    """Every registered method's settings as controls by setting name, method by method, two to a row."""
    controls: dict[str, Any] = {}
    for spec in specs():
        shown = [s for s in spec.controls if s.form]
        for pair in range(0, len(shown), 2):
            with gr.Row():
                controls |= {s.name: lenient(setting_control(spec, s)) for s in shown[pair : pair + 2]}
    return controls


def _html(value: str = "", **kwargs: Any) -> gr.HTML:
    return gr.HTML(value, css_template=CSS, **kwargs)


@dataclass(frozen=True)
class Page:
    """Every component of the page, by name."""

    state: gr.State
    stepper: gr.State  # the teaching mode's race being stepped through (a `race.RaceStepper`)
    media_tabs: gr.Tabs
    image: gr.Image
    video: gr.Video
    gallery: gr.Gallery
    prompt: gr.Textbox
    start: gr.Button
    step: gr.Button
    stop: gr.Button
    pair: gr.Dropdown
    methods: gr.CheckboxGroup
    max_new: gr.Slider
    temperature: gr.Slider
    seed: gr.Number
    prune_choice: gr.Radio
    prune_chosen: gr.Slider
    settings: dict[str, Any]  # every method's settings (`MethodSpec.controls`) by setting name
    custom_target: gr.Textbox
    custom_draft: gr.Textbox
    trace_in: gr.File
    speed: gr.Slider
    replay: gr.Button
    replay_step: gr.Button
    status: gr.HTML
    verdict: gr.HTML
    lanes: gr.HTML
    table: gr.HTML
    download: gr.DownloadButton
    draft_seen: gr.Image
    draft_note: gr.HTML
    plots: dict[str, gr.Plot]  # every panel's plot by its name (`panel_table`), also the attribute `fig_<name>`
    tree_lane: gr.Radio
    tree_round: gr.Slider
    explain: gr.HTML
    api_race: gr.Button
    api_replay: gr.Button
    api_result: gr.JSON
    # The MCP tool `race_api` (app/mcp_tool.py): the race's inputs, then whether to add the panels and the trace
    api_race_json: Any = None
    api_json_asked: tuple[Any, ...] = ()
    api_json: Any = None
    # The MCP tool `replay_api`: the trace and its pace, then whether to add the panels
    api_replay_json: Any = None
    sketch: Any = None  # the Draw tab's pad (app/sketch.py)
    draw_tab: Any = None  # the Draw tab (opening it with the pad empty says what Start would race)
    teach: Any = None  # steps through the teaching recording (app/teaching.py)
    slides: Any = None  # "Export for slides": the race on screen as one offline HTML replay (app/export/)
    slides_file: Any = None
    gif: Any = None  # "… as an animated GIF" of the same race (drawn with PIL on the server: no browser)
    video_export: Any = None  # "… or a video": the GIF's frames as a WebM (VP9), no browser
    # The budget sweep of the chosen pair beside its cost curve (measured when first asked for;
    # sage_core/studies/sweep_figure.py)
    sweep_show: Any = None
    sweep_note: Any = None
    fig_sweep: Any = None
    # "Also race each method with the pair's one-pass draft" (`second_draft`: lanes keyed "sage/one-pass")
    second_draft: Any = None

    def __post_init__(self) -> None:
        for name, plot in self.plots.items():  # (each panel's plot by its attribute too: `Panel.attribute`)
            object.__setattr__(self, f"fig_{name}", plot)

    @property
    def race_inputs(self) -> list[Any]:
        """The race's inputs, in the order of the API's parameters (`inputs.race_fields()`)."""
        named = {
            "image": self.image,
            "video": self.video,
            "prompt": self.prompt,
            "pair": self.pair,
            "custom_target": self.custom_target,
            "custom_draft": self.custom_draft,
            "methods": self.methods,
            "max_new_tokens": self.max_new,
            "prune_choice": self.prune_choice,
            "prune_chosen": self.prune_chosen,
            "temperature": self.temperature,
            "seed": self.seed,
            **self.settings,
            "second_draft": self.second_draft,
        }
        return [named[name] for name in race_fields()]

    @property
    def view(self) -> list[Any]:
        """Everything a race or a replay updates."""
        return [
            self.status,
            self.verdict,
            self.lanes,
            self.table,
            *self.plots.values(),
            self.explain,
            self.tree_round,
            self.tree_lane,
            self.download,
            self.state,
        ]


def build_page(
    examples: list[Example], pair_choices: list[tuple[str, str]], default_pair: str, limits: Limits, custom: str = ""
) -> Page:
    """Lay the page out (inside a `gr.Blocks`); `custom` says which custom models the server allows (none: "").

    The story reads left to right, top to bottom: the input and Start race; the two texts, the speedup
    and the badge; ① entropy → depth/width; ② this round's tree (its shape and accepted path) with the
    explainer; ③ shapes, ④ τ and ⑤ the race per round; the figures table. The talk view (`TALK_CSS`)
    pins the texts, the badge, ① and ② to one projector screen."""
    state = gr.State(None, time_to_live=STATE_TTL)
    stepper = gr.State(None, time_to_live=STEPPER_TTL)
    _html(INTRO, elem_id="intro")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=320, elem_id="sage-inputs"):
            with gr.Tabs() as media_tabs:
                with gr.Tab("Image", id="image"):
                    image = image_input(
                        label="Image", height=190, sources=["upload", "clipboard"], elem_id="image-input"
                    )
                with gr.Tab("Video", id="video"):
                    video = lenient(gr.Video(label="Video", height=190, sources=["upload"], elem_id="video-input"))
                with gr.Tab("Draw", id="draw", elem_id="draw-tab") as draw_tab:
                    sketch = sketch_pad()
            _html(EXAMPLES_NOTE)
            gallery = gr.Gallery(
                [(e.thumbnail(), ("video: " if e.is_video else "") + e.prompt) for e in examples],
                label="Examples",
                show_label=False,
                columns=5,
                height=150,
                allow_preview=False,
                object_fit="contain",
                elem_id="examples",
                buttons=[],
            )
            prompt = gr.Textbox(label="Prompt", value="", placeholder=DEFAULT_PROMPT, lines=2)
            with gr.Row(elem_id="sage-controls"):
                start = gr.Button("▶ Start race (s)", variant="primary", elem_id="start-race", min_width=120)
                step = gr.Button("▶| Step (→)", elem_id="step-round", min_width=90)
                stop = gr.Button("■ Stop", variant="stop", elem_id="stop-race", min_width=70)
                talk = gr.Button("Talk view (t)", elem_id="talk-toggle", min_width=110)
            talk.click(None, None, None, js="() => window.sageTalk && window.sageTalk()")
            pair = gr.Dropdown(
                pair_choices, value=default_pair, label="Model pair (target + draft)", allow_custom_value=True
            )
            # (on a phone, the race's settings scroll in a box of their own: PAGE_CSS)
            with gr.Column(elem_id="sage-settings"):
                methods = lenient(
                    gr.CheckboxGroup(
                        [(spec.label, spec.name) for spec in specs()],
                        value=DEFAULT_METHODS,
                        label="Methods in the race",
                        elem_id="methods",
                    )
                )
                second_draft = lenient(
                    gr.Radio(
                        list(SECOND_DRAFT_CHOICES),
                        value="off",
                        label="Also race each method with the pair's one-pass draft (the built-in pair has one)",
                        elem_id="second-draft",
                    )
                )
                max_new = lenient(
                    gr.Slider(1, limits.max_new_tokens, value=DEFAULT_MAX_NEW_TOKENS, step=1, label="Max new tokens")
                )
                with gr.Row():
                    temperature = lenient(
                        gr.Slider(
                            0,
                            MAX_TEMPERATURE,
                            value=0,
                            step=0.05,
                            label="Temperature (0 = greedy)",
                            elem_id="temperature",
                            scale=3,
                        )
                    )
                    seed = lenient(
                        gr.Number(None, label="Seed (empty: fresh)", precision=0, elem_id="seed", scale=1, min_width=90)
                    )
                prune_choice, prune_chosen = (lenient(control) for control in pruning_controls())
            label = "Advanced: the methods' settings" + (", custom models" if custom else "")
            with gr.Accordion(label, open=False):
                settings = settings_controls()
                custom_target = gr.Textbox(
                    "", label=f"Custom target ({custom}; pick 'Custom' above)", visible=bool(custom)
                )
                custom_draft = gr.Textbox(
                    "", label="Custom draft (same family and tokenizer as the target)", visible=bool(custom)
                )
            teach = gr.Button(TEACHING_BUTTON, elem_id="step-teaching", size="sm", variant="secondary")
            with gr.Accordion("Replay a recorded trace (no model needed)", open=False):
                trace_in = gr.File(
                    label=f"Trace (.jsonl, at most {limits.max_trace_mb:g} MB)",
                    file_types=[".jsonl", ".json", ".txt"],
                    type="filepath",
                    elem_id="replay-file",
                )
                speed = lenient(
                    gr.Slider(
                        0.25, 50, value=1, step=0.25, label="Replay speed (× the recorded pace)", elem_id="replay-speed"
                    )
                )
                with gr.Row():
                    replay = gr.Button("▶ Replay trace", elem_id="replay")
                    replay_step = gr.Button("▶| Step through it (→)", elem_id="step-replay")
        with gr.Column(scale=9, min_width=360, elem_id="sage-stage"):
            with gr.Row(equal_height=False):
                with gr.Column(scale=5, min_width=340):
                    status = _html(status_html("Ready. The models load on the first race."), elem_id="status")
                    verdict = _html(badge_html(None), elem_id="verdict")
                    lanes = _html(race_html(None), elem_id="lanes")
                    draft_seen, draft_note = draft_view_outputs()  # shown after a race with pruning
                with gr.Column(scale=4, min_width=340):
                    plots = {panel.name: _panel(panel) for panel in placed("stage")}
            with gr.Row(equal_height=False):
                with gr.Column(scale=3, min_width=340):
                    with gr.Row(equal_height=False, elem_id="tree-controls"):
                        tree_lane = gr.Radio([], value=None, label="Draft tree of", scale=1)
                        tree_round = gr.Slider(
                            0,
                            1,
                            value=0,
                            step=1,
                            label="Round (0 = prefill)",
                            scale=2,
                            interactive=False,
                            elem_id="tree-step",
                        )
                    plots |= {panel.name: _plot(panel) for panel in placed("tree")}
                with gr.Column(scale=2, min_width=340):
                    explain = _html(EXPLAIN_EMPTY, elem_id="explain")
                    _tour(EXPLAIN_HELP)
            with gr.Row(equal_height=False):
                plots |= {panel.name: _panel(panel) for panel in placed("row")}
            table = _html("", elem_id="figures-table")
            with gr.Row():
                download = gr.DownloadButton("⬇ Download trace (JSON lines)", visible=False, size="sm")
                slides = gr.Button(
                    "Export for slides: one HTML file that replays offline", size="sm", elem_id="export-slides"
                )
                gif = gr.Button("… or an animated GIF", size="sm", elem_id="export-gif")
                video_export = gr.Button("… or a video (WebM)", size="sm", elem_id="export-webm")
            slides_file = gr.File(
                label="For slides (HTML replay, GIF or WebM video)", visible=False, elem_id="slides-file"
            )
            sweep_show, sweep_note, fig_sweep = sweep_outputs()
    return Page(
        state=state,
        stepper=stepper,
        media_tabs=media_tabs,
        image=image,
        video=video,
        gallery=gallery,
        prompt=prompt,
        start=start,
        step=step,
        stop=stop,
        pair=pair,
        methods=methods,
        second_draft=second_draft,
        max_new=max_new,
        temperature=temperature,
        seed=seed,
        prune_choice=prune_choice,
        prune_chosen=prune_chosen,
        draft_seen=draft_seen,
        draft_note=draft_note,
        settings=settings,
        custom_target=custom_target,
        custom_draft=custom_draft,
        trace_in=trace_in,
        speed=speed,
        replay=replay,
        replay_step=replay_step,
        teach=teach,
        status=status,
        verdict=verdict,
        lanes=lanes,
        table=table,
        download=download,
        plots={panel.name: plots[panel.name] for panel in panel_table()},  # (in the table's order)
        tree_lane=tree_lane,
        tree_round=tree_round,
        explain=explain,
        api_race=gr.Button(visible=False),
        api_replay=gr.Button(visible=False),
        api_result=gr.JSON(visible=False),
        api_race_json=gr.Button(visible=False),
        api_json_asked=(gr.Checkbox(False, visible=False), gr.Checkbox(False, visible=False)),
        api_json=gr.Textbox(visible=False),
        api_replay_json=gr.Button(visible=False),
        sketch=sketch,
        draw_tab=draw_tab,
        slides=slides,
        slides_file=slides_file,
        gif=gif,
        video_export=video_export,
        sweep_show=sweep_show,
        sweep_note=sweep_note,
        fig_sweep=fig_sweep,
    )
