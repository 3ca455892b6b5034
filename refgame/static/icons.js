/* Drawn icons next to names: one SVG per resource, building kind and unit in
 * /static/icons/ (tests/refgame/test_icons.py checks there is one for each). An icon is
 * decoration beside its name's text, so screen readers skip it and text stays the same. */

const ICON_DIR = '/static/icons/';
const NAME = /^[a-z][a-z_]{0,31}$/; // the game's kind and unit names; anything else gets none

/* <img class="icon"> of ``name``, or null for a name that cannot have one. */
export function icon(name, size = 20) {
  if (typeof name !== 'string' || !NAME.test(name)) return null;
  const img = document.createElement('img');
  img.className = 'icon';
  img.src = `${ICON_DIR}${name}.svg`;
  img.alt = '';
  img.width = size;
  img.height = size;
  img.setAttribute('aria-hidden', 'true');
  img.addEventListener('error', () => img.remove()); // a kind newer than the icons: text only
  return img;
}

/* A cost as nodes, "[icon]120 wood, [icon]100 clay": the same text as the plain form. */
export function costNodes(cost) {
  const nodes = [];
  for (const [resource, n] of Object.entries(cost)) {
    if (n <= 0) continue;
    if (nodes.length) nodes.push(', ');
    const part = document.createElement('span');
    part.className = 'with-icon';
    part.append(...[icon(resource, 16), `${n} ${resource}`].filter(Boolean));
    nodes.push(part);
  }
  return nodes;
}
