//! The measuring knob `CANOPY_PACK_TUNING=within=W` (within-file ranking,
//! off by default): which of a file's units take the file's slots follows
//! how well their own names match the question. Its own test binary: the
//! knob is an environment variable, and no other test may run while it is
//! set.

use canopy_test_support::repo::write;

use canopy_core::index::NoProgress;
use canopy_core::pack::EvidencePack;
use canopy_core::{Engine, EngineOptions};

mod pack_knobs;

/// `draw` and `_render_with_gc` hold most of the question's words in their
/// bodies; `set_linestyle`, the method the title names in words, holds few.
const PATCHES: &str = "class Patch:
    \"\"\"A 2D shape with a face colour and an edge colour.\"\"\"

    def __init__(self, edgecolor=None, linewidth=None):
        self._edgecolor = edgecolor
        self._linewidth = linewidth
        self._dash_pattern = (0, None)

    def set_linestyle(self, ls):
        \"\"\"Set how the edge is stroked.\"\"\"
        self._linestyle = ls
        self._dash_pattern = (0, _scale(ls, self._linewidth))

    def draw(self, renderer):
        \"\"\"Draw the patch objects: the renderer's gc gets the dash offset and the dash of the linestyle; the patch is drawn with the dash tuple.\"\"\"
        gc = renderer.new_gc()
        offset, dashes = self._dash_pattern
        gc.set_dashes(offset, dashes)
        renderer.draw_path(gc, self.get_path())
        gc.restore()

    def _render_with_gc(self, renderer, gc):
        \"\"\"Hand the dash offset and the dash tuple of the patch linestyle to the gc of the renderer: the patch is drawn with no effect lost.\"\"\"
        offset, dashes = self._dash_pattern
        gc.set_dashes(offset, dashes)
        renderer.draw_path(gc, self.get_path())


def _scale(pattern, linewidth):
    return pattern
";

const LINES: &str = "class Line2D:
    \"\"\"A line: its dash offset and dash sequence come from its linestyle.\"\"\"

    def draw(self, renderer):
        \"\"\"Draw the line with its dash offset and dash sequence.\"\"\"
        gc = renderer.new_gc()
        gc.set_dashes(self._offset, self._dashes)
        renderer.draw_path(gc, self._path)
";

const QUESTION: &str = "A linestyle set with an offset has no effect in patch objects
When a patch is drawn with a dash tuple such as (10, (10, 10)), the offset of the dash is ignored:
the renderer draws the patch as if the dash offset were 0. A Line2D with the same dash tuple honours the offset.";

fn names(p: &EvidencePack) -> Vec<String> {
    p.handles
        .iter()
        .map(|h| h.qualified_name.clone().unwrap_or_default())
        .collect()
}

fn files(p: &EvidencePack) -> Vec<String> {
    p.files.iter().map(|f| f.file_path.clone()).collect()
}

#[test]
fn a_file_s_slots_go_to_the_units_whose_names_the_question_holds_only_with_the_knob() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "art/patches.py", PATCHES);
    write(r, "art/lines.py", LINES);
    write(
        r,
        "art/colors.py",
        "def to_rgba(c):\n    \"\"\"Convert a colour to an RGBA tuple.\"\"\"\n    return tuple(c)\n",
    );
    let e = Engine::open(r, EngineOptions::default()).unwrap();
    e.index(None, &NoProgress).unwrap();
    let pack = |e: &Engine| pack_knobs::pack_for(e, QUESTION);

    // Off (the default): the file's two slots go to the two units whose
    // bodies match the report best.
    let off = pack(&e);
    let off_names = names(&off);
    assert!(
        off_names.contains(&"Patch.draw".to_string()),
        "{off_names:?}"
    );
    assert!(
        off_names.contains(&"Patch._render_with_gc".to_string()),
        "{off_names:?}"
    );
    assert!(
        !off_names.contains(&"Patch.set_linestyle".to_string()),
        "{off_names:?}"
    );

    // SAFETY: this binary holds this one test, so no other thread reads the
    // environment while it changes.
    unsafe { std::env::set_var("CANOPY_PACK_TUNING", "within=0.4") };
    let on = pack(&e);
    unsafe { std::env::remove_var("CANOPY_PACK_TUNING") };
    let on_names = names(&on);
    // The method whose name the title holds (`linestyle` … `set`) takes the
    // file's first slot, the best body match keeps the second; the files,
    // their order and their number of handles stay, and so does the guidance.
    let in_patches = |n: &[String]| -> Vec<String> {
        n.iter()
            .filter(|n| n.starts_with("Patch."))
            .cloned()
            .collect()
    };
    assert_eq!(
        in_patches(&on_names),
        ["Patch.set_linestyle", "Patch.draw"],
        "{on_names:?}"
    );
    assert_eq!(files(&off), files(&on));
    assert_eq!(off.files, on.files);
    assert_eq!(off.guidance, on.guidance);
    assert_eq!(off.signals, on.signals);

    // The floor on weak name matches (`share`) leaves a strong one alone:
    // the title holds all of `set_linestyle`'s words.
    unsafe { std::env::set_var("CANOPY_PACK_TUNING", "within=0.4,share=0.5") };
    let floored = pack(&e);
    unsafe { std::env::remove_var("CANOPY_PACK_TUNING") };
    assert_eq!(names(&floored), on_names);
}
