// A block's figures as it finishes: a line in the block, the image under the turn.
// The finished turn's fragment (server-rendered) shows the same; this only fills the wait.

const figureUrl = (cid, digest) => `/api/conversations/${cid}/figures/${digest}`;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function label(figure) {
  const size = `${figure.width}×${figure.height} px`;
  return `figure ${figure.position + 1}: ${size}${figure.title ? ` · ${figure.title}` : ""}`;
}

function card(cid, figure, name) {
  const url = figureUrl(cid, figure.digest);
  const node = el("figure", "figure");
  node.dataset.digest = figure.digest;
  const open = el("a", "figure-open");
  open.href = url;
  open.target = "_blank";
  open.rel = "noopener";
  open.title = `Open full size (${figure.width}×${figure.height})`;
  const image = el("img");
  image.src = url;
  image.alt = label(figure);
  image.width = figure.width;
  image.height = figure.height;
  open.append(image);
  const caption = el("figcaption");
  const download = el("a", "figure-download", "Download");
  download.href = url;
  download.download = name;
  caption.append(
    el("span", "figure-title", figure.title || `Figure ${figure.position + 1}`),
    " ", el("span", "meta", `${figure.width}×${figure.height} px`), " ", download,
  );
  node.append(open, caption);
  return node;
}

// e: the block_finished event; turn: the live turn's article; block: its block node.
export function showFigures(cid, turn, block, position, e) {
  const figures = e.block.figures || [];
  if (!figures.length || !turn) return;
  let gallery = turn.querySelector(".turn-figures");
  if (!gallery) {
    gallery = el("div", "turn-figures");
    turn.querySelector(".timeline")?.after(gallery);
  }
  for (const figure of figures) {
    const link = el("a", "figure-link", label(figure));
    link.href = figureUrl(cid, figure.digest);
    link.target = "_blank";
    link.rel = "noopener";
    const note = el("p", "figure-note");
    note.append(link);
    block?.append(note);
    const name = `t${position}-i${e.iteration}-b${e.index}-${figure.position + 1}.png`;
    gallery.append(card(cid, figure, name));
  }
}
