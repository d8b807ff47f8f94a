//! The weak-match rules of the within-file ranking
//! (`CANOPY_PACK_TUNING=within=W,words=2,dunder=1,rare=R,stop=1`): a unit
//! whose own name the question holds only by one generic word, by the words
//! of a dunder, or by words most of the index holds, must not take a slot
//! of its file from a sibling the ranking put above it; and a pack that says
//! stop shows the ranking's handles. Each rule is checked with the others
//! that do not decide its case on, so each case fails when its rule is
//! switched off (the knob without it lifts the unit). Its own test
//! binary: the knob is an environment variable, and no other test may run
//! while it is set.

use canopy_test_support::repo::write;

use canopy_core::index::NoProgress;
use canopy_core::pack::EvidencePack;
use canopy_core::{Engine, EngineOptions};

mod pack_knobs;

/// `_add_solids` and `_draw_all` hold the questions' words in their bodies;
/// `_ColorbarSpine.draw` (one word: `draw`), `__init_subclass__` (`init`
/// and `subclass`) and `update_ticks` (two words many units hold) rank
/// below them.
const COLORBAR: &str = "class Colorbar:
    \"\"\"A colorbar: solids, edges and extensions drawn beside an axes.\"\"\"

    def _add_solids(self, X, Y, C):
        \"\"\"The colorbar solids between the edges: with extend, the extremities get no edge line, so the edges at the extremities are missing; dividers and extensions are drawn over the solids.\"\"\"
        mesh = self.ax.pcolormesh(X, Y, C, edgecolors='none')
        self.dividers.set_segments(self._edges(X, Y))
        return mesh

    def _draw_all(self):
        \"\"\"Lay out the colorbar: extensions at the extremities, then the solids, then the edges and dividers.\"\"\"
        X, Y = self._mesh()
        self._do_extends()
        self._add_solids(X, Y, self._values)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        registry = cls._registry
        registry.append(cls)
        for base in cls.__mro__[1:]:
            hooks = getattr(base, '_hooks', ())
            for hook in hooks:
                hook(cls)
        cls._registered = True
        cls._orientation_default = 'vertical'
        cls._location_default = 'right'
        cls._pad_default = 0.05

    def update_ticks(self):
        self.locator.refresh(self.long_axis)
        self.formatter.refresh(self.long_axis)


class _ColorbarSpine:
    def draw(self, renderer):
        ret = super().draw(renderer)
        self.stale = False
        return ret
";

/// Many units hold `update` and `ticks`: they say little about which of
/// them a question means.
fn ticker() -> String {
    let mut s = String::new();
    for i in 0..40 {
        s.push_str(&format!(
            "def locator_{i}(axis):\n    \"\"\"Update the ticks of axis {i} (a subclass may override).\"\"\"\n    return axis.update_ticks()\n\n\n"
        ));
    }
    s
}

/// A file the pack's stop rests on: the question writes
/// `compute_invoice_total(invoice)` as code; `apply_discount` holds the
/// question's words in its body and one of the title's in its name;
/// `discount_total` holds two words of the title (as their stems) and none of the text.
const INVOICE: &str = "class InvoiceRenderer:
    \"\"\"Renders invoices to PDF.\"\"\"

    def render_invoice(self, invoice):
        total = compute_invoice_total(invoice)
        return self.pdf.draw(total)

    def render_header(self, invoice):
        return invoice.customer


def compute_invoice_total(invoice):
    return sum(line.amount * line.quantity for line in invoice.lines)


def apply_discount(invoice, line):
    \"\"\"When an invoice has a discount line, the discount is subtracted from the sum of amount times quantity of every line, so customers are billed the price less the discount.\"\"\"
    return invoice.amount - line.amount


def discount_total(rows):
    return [row for row in rows if row.kind != 'x']
";

/// Questions whose titles hold the words of a unit ranked below the fix:
/// `draw` (one word), `__init__.py`'s `init` with `subclass` (a dunder),
/// `update` and `ticks` (common words).
const DRAW: &str = "Colorbar does not draw the edges at the extremities with extend
With extend='both' the colorbar solids have dividers between the edges, but the edges at the extremities are missing.";
const DUNDER: &str = "A colorbar subclass imported in __init__.py loses the edges at the extremities
With extend='both' the colorbar solids have dividers between the edges, but the edges at the extremities are missing.";
const TICKS: &str = "Colorbar ticks do not update: the edges at the extremities are missing
With extend='both' the colorbar solids have dividers between the edges, but the edges at the extremities are missing.";
const STOP: &str = "Totals ignore discounts\n\nWhen an invoice has a discount line, calling compute_invoice_total(invoice) returns the sum of amount times quantity of every line, so the discount is never subtracted and customers are billed the full price for the whole invoice.";

fn names(p: &EvidencePack) -> Vec<String> {
    p.handles
        .iter()
        .map(|h| h.qualified_name.clone().unwrap_or_default())
        .collect()
}

fn pack_with(e: &Engine, question: &str, knob: &str) -> EvidencePack {
    // SAFETY: this binary holds this one test, so no other thread reads the
    // environment while it changes.
    unsafe { std::env::set_var("CANOPY_PACK_TUNING", knob) };
    let pack = pack_knobs::pack_for(e, question);
    unsafe { std::env::remove_var("CANOPY_PACK_TUNING") };
    pack
}

/// Every rule on: two held words, no dunder words, rarity at IDF 3 (the
/// fixture's common words are in about half its units), stop packs kept.
const ALL: &str = "within=0.4,words=2,dunder=1,rare=3,stop=1";

#[test]
fn weak_name_matches_and_stop_packs_keep_the_ranking_s_handles() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "plot/colorbar.py", COLORBAR);
    write(r, "plot/ticker.py", ticker());
    write(r, "billing/invoice.py", INVOICE);
    for i in 0..8 {
        write(
            r,
            &format!("billing/reports/report_{i}.py"),
            format!(
                "def discount_report_{i}(invoices):\n    \"\"\"Totals of report {i}; rows to ignore are left out.\"\"\"\n    return [invoice.totals for invoice in invoices]\n"
            ),
        );
    }
    write(
        r,
        "billing/tax.py",
        "def apply_vat(amount, rate):\n    \"\"\"Adds value added tax to an invoice amount.\"\"\"\n    return amount * (1 + rate)\n",
    );
    let e = Engine::open(r, EngineOptions::default()).unwrap();
    e.index(None, &NoProgress).unwrap();

    // (question, the unit a weak match lifts, the knob with every rule on
    // but the one that stops it). `update_ticks` and the words of
    // `discount_total` are common in the fixture, so rarity is off where it
    // would stop them too.
    let cases = [
        (
            DRAW,
            "_ColorbarSpine.draw",
            ALL,
            "within=0.4,dunder=1,rare=3,stop=1",
        ),
        (
            DUNDER,
            "Colorbar.__init_subclass__",
            "within=0.4,words=2,dunder=1,stop=1",
            "within=0.4,words=2,stop=1",
        ),
        (
            TICKS,
            "Colorbar.update_ticks",
            ALL,
            "within=0.4,words=2,dunder=1,stop=1",
        ),
        (
            STOP,
            "discount_total",
            "within=0.4,words=2,dunder=1,stop=1",
            "within=0.4,words=2,dunder=1",
        ),
    ];
    for (question, lifted, rules, without_rule) in cases {
        let lifted = lifted.to_string();
        let off = pack_with(&e, question, "within=0");
        let weak = pack_with(&e, question, without_rule);
        let all = pack_with(&e, question, rules);
        // The ranking does not show the unit; without the rule it takes a
        // slot of its file; with the rules the pack is the ranking's.
        assert!(!names(&off).contains(&lifted), "{:?}", names(&off));
        assert!(
            names(&weak).contains(&lifted),
            "{without_rule}: {:?}",
            names(&weak)
        );
        assert_eq!(names(&all), names(&off), "{rules}");
        assert_eq!(all.expand_suggestion, off.expand_suggestion, "{rules}");
        assert_eq!(all.guidance, off.guidance, "{rules}");
    }
    // The stop case is a stop pack, and the swap would change the first
    // three handles, the ones a stop tells the agent to expand.
    let stop = pack_with(&e, STOP, "within=0");
    assert!(stop.guidance.stop_querying, "{:?}", stop.guidance);
    let swapped = pack_with(&e, STOP, "within=0.4,words=2,dunder=1");
    assert_eq!(swapped.guidance, stop.guidance);
    assert_ne!(swapped.expand_suggestion[..3], stop.expand_suggestion[..3]);
}
