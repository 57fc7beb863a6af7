// Keeps a scrolling box at its end while what it shows grows, as chat products do: the reader
// scrolling up lets go, scrolling back down to the end (or the jump control) takes hold again.

const SLACK = 32;  // pixels from the end that still count as "at the end"

export function follow(scroller, content, jump) {
  let pinned = true;
  let lastTop = scroller.scrollTop;

  const atEnd = () => scroller.scrollHeight - scroller.clientHeight - scroller.scrollTop <= SLACK;
  const show = () => { jump.hidden = pinned || atEnd(); };
  const toEnd = () => {
    scroller.scrollTop = scroller.scrollHeight;
    lastTop = scroller.scrollTop;
    show();
  };

  // Only the reader moves the box up: growth never does, and this code only moves it down.
  scroller.addEventListener("scroll", () => {
    const top = scroller.scrollTop;
    if (atEnd()) pinned = true;
    else if (top < lastTop) pinned = false;
    lastTop = top;
    show();
  }, { passive: true });

  // After layout and before paint: new output is drawn already in place.
  const resized = new ResizeObserver(() => { if (pinned) toEnd(); else show(); });
  resized.observe(content);
  resized.observe(scroller);

  // Opening an older turn's details is reading, not following.
  scroller.addEventListener("click", (event) => {
    if (event.target.closest("summary") && !event.target.closest(".live")) release();
  });

  function pin() { pinned = true; toEnd(); }
  function release() { pinned = false; show(); }
  jump.addEventListener("click", () => { pin(); scroller.focus({ preventScroll: true }); });

  return {
    pin,
    // Show ``node`` at the top instead of the end (a link to one turn).
    reveal(node) {
      release();
      node.scrollIntoView({ block: "start" });
      lastTop = scroller.scrollTop;
      show();
    },
  };
}
