"""The web board in a real browser: Debian's Chromium, headless, driven by Selenium
against the real server of test_web_api.py (real engines). Skipped without Chromium
and ChromeDriver (``apt-get install chromium chromium-driver``), except on CI, where
.ci/run installs them and a missing browser fails.

Set C4FAST_WEB_SCREENSHOT=docs/web_board.png to write the README's screenshot."""

import os
import shutil

import pytest

pytest.importorskip("starlette")
from test_web_api import web_server  # noqa: E402,F401  (the session's server)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WAIT_S = 60  # generous bound on any one condition (a loaded 2-core box); never a sleep


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} not found (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="session")
def driver():
    why = _missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests need Chromium on CI: {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1180,1000", "--hide-scrollbars"):
        opts.add_argument(arg)
    d = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    yield d
    d.quit()


class Page:
    """The board page in the browser, with waits on the page's own state attributes."""

    def __init__(self, driver, url):
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        self.d, self.By = driver, By
        self.wait = WebDriverWait(driver, WAIT_S)
        driver.get(url + "/")
        driver.execute_script("localStorage.clear()")
        driver.get(url + "/")
        self.until(lambda: self.body("data-ready") == "1")
        if self.el("analysis-toggle").is_selected():  # a browser may restore form state
            self.el("analysis-toggle").click()

    def until(self, cond):
        try:
            return self.wait.until(lambda _: cond())
        except Exception:
            self.d.save_screenshot("/tmp/fail.png")
            raise AssertionError(f"timed out; page error: {self.error()!r}, status: {self.el('status').text!r}")

    def body(self, attr: str):
        return self.d.find_element(self.By.TAG_NAME, "body").get_attribute(attr)

    def css(self, sel: str):
        return self.d.find_elements(self.By.CSS_SELECTOR, sel)

    def el(self, id_: str):
        return self.d.find_element(self.By.ID, id_)

    def ply(self) -> int:
        return int(self.body("data-ply") or -1)

    def idle(self) -> bool:
        return self.body("data-busy") == "0"

    def select(self, id_: str, value: str) -> None:
        from selenium.webdriver.support.ui import Select

        Select(self.el(id_)).select_by_value(value)

    def type(self, id_: str, text: str) -> None:
        e = self.el(id_)
        e.clear()
        e.send_keys(text)

    def new_game(self, size="6x7", forbidden="none", engine="greedy", first="human", cell=None):
        old = self.body("data-game")
        self.select("size", size)
        self.select("forbidden-mode", forbidden)
        if cell:
            self.type("forbidden-row", str(cell[0]))
            self.type("forbidden-col", str(cell[1]))
        self.select("first", first)
        self.type("engine", engine)
        self.el("new-game").click()
        self.until(lambda: self.body("data-game") not in (None, old) and self.idle())

    def load(self, replay: str, engine="greedy") -> None:
        old = self.body("data-game")
        self.type("engine", engine)
        self.type("replay-input", replay)
        self.el("load-replay").click()
        self.until(lambda: self.body("data-game") not in (None, old) and self.idle())

    def stones(self, player=None) -> list:
        sel = "#board circle.stone[data-player]" if player is None else \
            f"#board circle.stone[data-player='{player}']"
        return [e for e in self.css(sel) if "pv-stone" not in (e.get_attribute("class") or "")]

    def click_column(self, col: int) -> None:
        self.css(f"#board .col-hit[data-col='{col}']")[0].click()

    def error(self) -> str:
        e = self.el("error")
        return "" if e.get_attribute("hidden") is not None else e.text


def test_play_a_whole_game_then_an_illegal_click(driver, web_server):
    p = Page(driver, web_server.url)
    p.new_game(size="6x7", forbidden="none", engine="greedy")
    assert p.ply() == 0 and len(p.css("#board circle.hole")) == 42
    assert "Your move" in p.el("status").text
    while p.body("data-result") == "":
        before = p.ply()
        heights = [sum(1 for s in p.stones() if s.get_attribute("data-col") == str(c)) for c in range(7)]
        p.click_column(next(c for c in range(7) if heights[c] < 6))
        p.until(lambda: p.idle() and p.ply() > before)
        assert p.error() == ""
        assert len(p.stones()) == p.ply()  # the person's stone and the engine's answer
        if p.body("data-result") == "":
            assert p.ply() == before + 2 and len(p.stones(2)) == p.ply() // 2
    assert "Game over" in p.el("status").text
    assert len(p.css("#moves li")) == p.ply()
    assert p.el("replay").get_attribute("value").startswith("6x7:")
    n = len(p.stones())
    p.click_column(3)  # the game is over: the server refuses, the page says why
    p.until(lambda: "game is over" in p.error())
    assert len(p.stones()) == n and p.idle()


def test_a_full_column_click_is_refused_and_undo_works(driver, web_server):
    p = Page(driver, web_server.url)
    p.load("6x7:0,0,0,0,0,0", engine="uct:200")
    assert p.ply() == 6 and len(p.stones()) == 6
    p.click_column(0)
    p.until(lambda: "column 0 is full" in p.error())
    assert p.ply() == 6 and len(p.stones()) == 6
    p.click_column(3)
    p.until(lambda: p.idle() and p.ply() == 8)
    assert p.error() == "" and len(p.stones()) == 8
    p.el("undo").click()
    p.until(lambda: p.idle() and p.ply() == 6)
    assert len(p.stones()) == 6


def test_forbidden_cell_is_marked_and_hopped_over(driver, web_server):
    p = Page(driver, web_server.url)
    p.new_game(size="9x10", forbidden="chosen", cell=(0, 4), engine="random")
    marks = p.css("#board [data-forbidden='1']")
    assert len(marks) == 1 and (marks[0].get_attribute("data-row"), marks[0].get_attribute("data-col")) == ("0", "4")
    assert len(p.css("#board circle.hole")) == 89
    p.click_column(4)
    p.until(lambda: p.idle() and p.ply() == 2)
    red = p.stones(1)
    assert [(s.get_attribute("data-row"), s.get_attribute("data-col")) for s in red] == [("1", "4")]
    assert p.css("#moves li")[0].text.endswith("7 4")  # Saiblo notation: row 7 from the top


def test_the_analysis_overlay_shows_the_engines_view(driver, web_server):
    p = Page(driver, web_server.url)
    p.load("6x7:3,3,3,3,2,4,2,4", engine="uct:200")
    p.el("analysis-toggle").click()
    p.until(lambda: len(p.css("#overlay")) == 1)
    ov = p.css("#overlay")[0]
    assert ov.get_attribute("data-ply") == "8"
    assert len(p.css("#overlay text.visits")) == 7  # visits of every legal column
    assert len(p.css("#overlay text.value")) == 7
    assert len(p.css("#overlay .pv-stone")) >= 1  # the principal variation on the board
    assert len(p.css("#overlay .solver-cell")) == 7  # the exact verdict on 6x7
    assert p.css("#wdl .w") and "Best column" in p.el("analysis-info").text
    # the overlay follows the game: after a move it shows the new position
    p.click_column(0)
    p.until(lambda: p.idle() and p.ply() == 10 and p.css("#overlay")
            and p.css("#overlay")[0].get_attribute("data-ply") == "10")
    p.el("analysis-toggle").click()
    p.until(lambda: not p.css("#overlay"))


def test_the_overlay_shows_a_networks_policy(driver, web_server):
    p = Page(driver, web_server.url)
    p.new_game(size="9x10", forbidden="chosen", cell=(0, 4), engine="net:models/c4fast_cpu.npz:32")
    p.click_column(4)
    p.until(lambda: p.idle() and p.ply() == 2)
    p.el("analysis-toggle").click()
    p.until(lambda: len(p.css("#overlay")) == 1)
    assert len(p.css("#overlay rect.policy-bar")) >= 1
    assert len(p.css("#overlay rect.policy-bar.best")) == 1
    assert "raw value" in p.el("analysis-info").text
    p.el("analysis-toggle").click()


def test_screenshot_of_the_board_with_the_overlay(driver, web_server, tmp_path):
    p = Page(driver, web_server.url)
    playouts = 200 if os.environ.get("C4FAST_WEB_SCREENSHOT") else 64  # the README's is 200
    p.new_game(size="9x10", forbidden="chosen", cell=(0, 4), engine=f"net:models/c4fast_cpu.npz:{playouts}")
    for col in (4, 5, 3):
        before = p.ply()
        p.click_column(col)
        p.until(lambda: p.idle() and p.ply() > before)
    p.el("analysis-toggle").click()
    p.until(lambda: len(p.css("#overlay .pv-stone")) >= 1)
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).move_to_element(p.css("header h1")[0]).perform()  # no hover highlight
    driver.execute_script("document.activeElement.blur(); window.scrollTo(0, 0)")
    out = os.environ.get("C4FAST_WEB_SCREENSHOT") or str(tmp_path / "web_board.png")
    assert driver.save_screenshot(out)
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    p.el("analysis-toggle").click()
