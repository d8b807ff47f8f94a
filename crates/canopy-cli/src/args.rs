//! The arguments of `query`, `pack` and `context`, and the typed requests
//! they make ([`canopy_client::request`]): validated once, here, whichever
//! backend answers.

use canopy_client::request::{Context, Pack, Query, SearchArgs};
use canopy_core::CanopyError;
use canopy_core::context::ContextParams;
use canopy_core::pack::PackParams;
use canopy_core::query::QueryParams;
use clap::Args;

/// `canopy query`: the shared search parameters, a limit and an expand budget.
#[derive(Args, Debug)]
pub struct QueryArgs {
    #[command(flatten)]
    search: SearchArgs,
    /// Maximum handles (default 16, at most 200).
    #[arg(long, short, display_order = 8)]
    limit: Option<usize>,
    /// Auto-expand handles in rank order while their tokens fit this budget.
    #[arg(long, display_order = 9)]
    expand_budget: Option<u64>,
}

impl QueryArgs {
    fn params(self) -> QueryParams {
        self.search.params(self.limit, self.expand_budget, None)
    }

    /// The query, checked.
    pub fn query(self) -> Result<Query, CanopyError> {
        Query::new(self.params())
    }
}

/// `canopy pack`: a query and the pack's caps.
#[derive(Args, Debug)]
pub struct PackArgs {
    #[command(flatten)]
    query: QueryArgs,
    /// Most handles in the pack (default 8).
    #[arg(long)]
    max_handles: Option<usize>,
    /// Most handles per file (default 2).
    #[arg(long)]
    max_per_file: Option<usize>,
    /// Run a bounded server-side plan (follow definitions of the top hits).
    #[arg(long)]
    plan: bool,
    /// Most tokens the pack's handles may add up to (default 1500).
    #[arg(long)]
    max_tokens: Option<u64>,
}

impl PackArgs {
    /// The pack request, checked.
    pub fn pack(self) -> Result<Pack, CanopyError> {
        Pack::new(PackParams {
            query: self.query.params(),
            max_handles: self.max_handles,
            max_per_file: self.max_per_file,
            plan: self.plan.then_some(true),
            max_tokens: self.max_tokens,
        })
    }
}

/// `canopy context`.
#[derive(Args, Debug)]
pub struct ContextArgs {
    /// What you are about to do (an issue text is fine; "-" reads it from stdin). Of several
    /// lines, the first is taken as the summary and weighs most.
    task: String,
    /// Code to centre on: Type.method, Type::method, a path, or path:line[:col].
    #[arg(long)]
    focus: Option<String>,
    /// Most tokens the fragments' text may add up to.
    #[arg(long, default_value_t = canopy_core::context::DEFAULT_BUDGET)]
    budget: u64,
    /// Which strategy chooses candidates.
    #[arg(long, value_enum, default_value_t = StrategyArg::Fused)]
    strategy: StrategyArg,
}

impl ContextArgs {
    /// The context request, checked (the task read from stdin for `-`).
    pub fn context(self) -> anyhow::Result<Context> {
        let task = if self.task == "-" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| anyhow::anyhow!("reading the task from stdin: {e}"))?;
            text
        } else {
            self.task
        };
        Ok(Context::new(ContextParams {
            task,
            focus: self.focus,
            budget_tokens: Some(self.budget),
            strategy: Some(self.strategy.into()),
        })?)
    }
}

/// `--strategy` values (see `canopy_core::context::Strategy`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum StrategyArg {
    Fused,
    Keyword,
    Semantic,
    Graph,
    History,
    Decisions,
}

impl From<StrategyArg> for canopy_core::context::Strategy {
    fn from(s: StrategyArg) -> Self {
        use canopy_core::context::Strategy;
        match s {
            StrategyArg::Fused => Strategy::Fused,
            StrategyArg::Keyword => Strategy::Keyword,
            StrategyArg::Semantic => Strategy::Semantic,
            StrategyArg::Graph => Strategy::Graph,
            StrategyArg::History => Strategy::History,
            StrategyArg::Decisions => Strategy::Decisions,
        }
    }
}
