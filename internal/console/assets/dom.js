// The DOM helpers the page's sections share. Like the rest of the page,
// data goes in with textContent and DOM nodes only.

// cell is a table cell: label is its column's name (a phone shows it
// beside the value), content its text and nodes.
export function cell(label, ...content) {
  const td = document.createElement("td");
  td.dataset.label = label;
  td.append(...content);
  return td;
}

// button is a button of class cls that calls onClick.
export function button(text, cls, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = cls;
  b.textContent = text;
  b.addEventListener("click", onClick);
  return b;
}

// confirmButton is a button whose first click only arms it (it then says
// armedText) and whose second calls action: for what cannot be undone.
export function confirmButton(text, armedText, cls, action) {
  const b = button(text, cls, () => {
    if (b.dataset.armed) action();
    else {
      b.dataset.armed = "1";
      b.textContent = armedText;
    }
  });
  return b;
}
