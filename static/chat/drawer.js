// The sidebar as a drawer on narrow screens: the menu button opens it; its close button,
// the backdrop and Escape close it (narrow.css shows it from `body.sidebar-open`).

export class Drawer {
  /** dom: {sidebar, menu, close, backdrop} */
  constructor(dom) {
    this.dom = dom;
    dom.menu.addEventListener("click", () => {
      if (this.isOpen) this.close();
      else this.open();
    });
    dom.close.addEventListener("click", () => {
      this.close();
      dom.menu.focus();
    });
    dom.backdrop.addEventListener("click", () => this.close());
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.isOpen) {
        event.preventDefault(); // taken: it closes the list and does nothing else
        this.close();
        dom.menu.focus();
      }
    });
  }

  get isOpen() {
    return document.body.classList.contains("sidebar-open");
  }

  open() {
    document.body.classList.add("sidebar-open");
    this.dom.menu.setAttribute("aria-expanded", "true");
    this.dom.backdrop.hidden = false;
    const first = this.dom.sidebar.querySelector("button, a");
    if (first) first.focus();
  }

  close() {
    if (!this.isOpen) return;
    document.body.classList.remove("sidebar-open");
    this.dom.menu.setAttribute("aria-expanded", "false");
    this.dom.backdrop.hidden = true;
  }
}
