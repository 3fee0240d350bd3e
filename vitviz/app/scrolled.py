"""A phone's wide pictures keep their words in view while they scroll sideways.

On a phone (the page's CSS: at most PHONE_PX wide) a wide picture (the heads grid, the logit lens, a strip of
maps: `.vv-wide`) keeps its size, so its labels stay readable, and scrolls inside its box. Scrolled, its title
(at its left), its rows' labels and its colour bar (at its left, under it) would leave the screen with the
columns. Such a picture is drawn on a narrow screen with where those words are (vitviz.pictures.draw.Marked's
`frozen`, carried in its file's name by vitviz.app.serving.picfiles.file_name: "-f<left>-<top>-<bottom>"), and
this script lays over the scrolled box, at its left edge, the picture's own pixels of those three places: the
band above `top` (the title), the first `left` columns between `top` and `bottom` (the rows' labels) and the band
below `bottom` (the colour bar and its words). Nothing is drawn while the picture is not scrolled, and the layer
lets taps through to the picture under it.
"""

from __future__ import annotations

CSS = """
@media (max-width: 700px) {
  .vv-wide .image-container {position: relative;}
  .vv-frozen {position: absolute; pointer-events: none; z-index: 3; background-repeat: no-repeat;
              display: none;}
}
"""

JS = r"""
() => {
  const MARK = /-f(\d+)-(\d+)-(\d+)\.jpg$/;
  const BOX = '.vv-wide .image-container';
  const keep = (box) => {
    const img = box.querySelector('img');
    let layer = box.querySelector(':scope > .vv-frozen');
    const m = img && img.naturalWidth ? decodeURIComponent(img.src).match(MARK) : null;
    if (!m || box.scrollLeft <= 0) { if (layer) layer.style.display = 'none'; return; }
    if (!layer) { layer = document.createElement('div'); layer.className = 'vv-frozen'; box.appendChild(layer); }
    const k = img.clientWidth / img.naturalWidth;  // the picture's pixels on the screen
    const [left, top, bottom] = m.slice(1).map((v) => Number(v) * k);
    const w = Math.min(box.clientWidth, img.clientWidth), h = img.clientHeight;
    const y = img.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
    Object.assign(layer.style, {
      display: 'block', left: box.scrollLeft + 'px', top: y + 'px', width: w + 'px', height: h + 'px',
      backgroundImage: `url("${img.src}")`, backgroundSize: `${img.clientWidth}px ${h}px`,
      clipPath: `polygon(0 0, ${w}px 0, ${w}px ${top}px, ${left}px ${top}px, ${left}px ${bottom}px, `
        + `${w}px ${bottom}px, ${w}px ${h}px, 0 ${h}px)`,
    });
  };
  document.addEventListener('scroll', (e) => {
    if (e.target.matches && e.target.matches(BOX)) keep(e.target);
  }, true);
  document.addEventListener('load', (e) => {  // a new picture in a scrolled box
    const box = e.target.tagName === 'IMG' && e.target.closest(BOX);
    if (box) keep(box);
  }, true);
}
"""
