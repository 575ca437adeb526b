"""Checks run inside a page, for the accessibility tests: text contrast, field edges, polled parts."""

from __future__ import annotations

# Colours as the browser computed them; a background is the first opaque one up the tree, with the
# translucent ones above it blended in. Text over a background image (not a gradient) is skipped.
_COLOURS = r"""
const parse = c => { const m = c.match(/rgba?\(([^)]+)\)/); if (!m) return null;
  const p = m[1].split(',').map(parseFloat); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
const lum = ({r, g, b}) => { const f = c => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
const blend = (top, under) => ({r: top.r * top.a + under.r * (1 - top.a), g: top.g * top.a + under.g * (1 - top.a),
  b: top.b * top.a + under.b * (1 - top.a), a: 1});
const ratio = (x, y) => { const a = lum(x), b = lum(y); return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05); };
const backdrop = (el, from) => {
  const layers = [];
  for (let e = from ? el.parentElement : el; e; e = e.parentElement) {
    const style = getComputedStyle(e);
    if (style.backgroundImage !== 'none' && !style.backgroundImage.includes('gradient(')) return null;
    const c = parse(style.backgroundColor);
    if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
  }
  return layers.reverse().reduce((under, top) => blend(top, under), {r: 255, g: 255, b: 255, a: 1});
};
"""

LOW_CONTRAST_TEXT = "() => {" + _COLOURS + r"""
  const low = [], seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const el = walker.currentNode.parentElement;
    if (!walker.currentNode.textContent.trim() || seen.has(el)) continue;
    seen.add(el);
    if (!el.getClientRects().length || el.closest('.visually-hidden, svg, [hidden], button:disabled')) continue;
    const style = getComputedStyle(el), under = backdrop(el, false);
    if (!under || style.visibility === 'hidden') continue;
    let opacity = 1;
    for (let e = el; e; e = e.parentElement) opacity *= parseFloat(getComputedStyle(e).opacity);
    const ink = parse(style.color), text = blend({...ink, a: ink.a * opacity}, under);
    const size = parseFloat(style.fontSize), large = size >= 24 || (parseInt(style.fontWeight) >= 700 && size >= 18.66);
    const r = ratio(text, under);
    if (r < (large ? 3 : 4.5)) low.push(`${r.toFixed(2)}:1 ${el.tagName.toLowerCase()}.${el.className} "${el.textContent.trim().slice(0, 30)}"`);
  }
  document.querySelectorAll('[placeholder]').forEach(el => {
    const under = backdrop(el, false), ink = parse(getComputedStyle(el, '::placeholder').color);
    const r = ratio(blend(ink, under), under);
    if (r < 4.5) low.push(`${r.toFixed(2)}:1 placeholder of ${el.name}`);
  });
  return [...new Set(low)];
}"""

# A text field's edge against what is around it (WCAG 1.4.11: 3:1), the field's own white inside.
FAINT_FIELD_EDGES = "() => {" + _COLOURS + r"""
  return [...document.querySelectorAll('input[type=text], input[type=number], input[type=password], select, textarea')]
    .filter(el => el.getClientRects().length)
    .map(el => [el.name, ratio(parse(getComputedStyle(el).borderTopColor), backdrop(el, false)),
                ratio(parse(getComputedStyle(el).borderTopColor), backdrop(el, true))])
    .filter(([, inside, outside]) => Math.max(inside, outside) < 3)
    .map(([name, inside]) => `${name} ${inside.toFixed(2)}:1`);
}"""

# Live regions inside a part htmx polls: each poll that swaps it would have them read out again.
LIVE_REGIONS_IN_POLLED_PARTS = r"""() => [...document.querySelectorAll('[hx-trigger*="every"]')].flatMap(part =>
  [...part.querySelectorAll('[role=alert], [role=status], [role=log], [aria-live]')]
    .map(el => `#${part.id} ${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}.${el.className}`))"""

# aria-describedby and aria-labelledby ids that name nothing on the page.
MISSING_REFERENCES = r"""() => [...document.querySelectorAll('[aria-describedby], [aria-labelledby]')].flatMap(el =>
  ['aria-describedby', 'aria-labelledby'].flatMap(attr => (el.getAttribute(attr) || '').split(/\s+/).filter(Boolean)
    .filter(id => !document.getElementById(id)).map(id => `${el.name || el.id || el.tagName} ${attr}=${id}`)))"""

# Each error message by a field, and whether the field's aria-describedby names it (or what holds it).
ERRORS_NOT_NAMED_BY_THEIR_FIELD = r"""() => [...document.querySelectorAll('.field-error')].filter(error => {
  const holder = error.closest('.field, td');
  const field = holder && holder.querySelector('input, select, textarea');
  if (!field) return true;
  const named = (field.getAttribute('aria-describedby') || '').split(/\s+/).filter(Boolean).map(id => document.getElementById(id));
  return !named.some(el => el && el.contains(error)) || field.getAttribute('aria-invalid') !== 'true';
}).map(error => error.textContent.trim())"""
