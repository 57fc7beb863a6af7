"""The data conversation every channel shows (issue #24, "What it must show"): a CSV attached,
a question answered with pandas (merge, datetime, groupby, pivot, rolling), then a chart.

The scripted model replies with the code; ``expected`` computes the answer here, outside the
sandbox, so a test can check the number the channel shows.
"""

from __future__ import annotations

import io

import pandas as pd

from tests.scripted import reply

SALES = """day,region,units,price
2024-01-03,north,3,2.50
2024-01-09,south,5,2.00
2024-01-17,north,4,2.50
2024-02-02,south,1,3.00
2024-02-11,north,7,2.50
2024-02-20,east,2,4.00
2024-03-05,south,6,2.00
2024-03-14,east,3,4.00
2024-03-28,north,2,2.50
"""
MANAGERS = "region,manager\nnorth,Ada\nsouth,Grace\neast,Linus\n"

ANALYSIS = """import pandas as pd
sales = pd.read_csv('sales.csv', parse_dates=['day'])
managers = pd.read_csv('managers.csv')
merged = sales.merge(managers, on='region')
merged['revenue'] = merged['units'] * merged['price']
merged['month'] = merged['day'].dt.to_period('M').astype(str)
by_manager = merged.groupby('manager')['revenue'].sum().sort_values(ascending=False)
table = merged.pivot_table(index='month', columns='region', values='units', aggfunc='sum',
                           fill_value=0)
table['rolling'] = table.sum(axis=1).rolling(2, min_periods=1).mean()
best = by_manager.index[0]
best_revenue = float(by_manager.iloc[0])"""

CHART = """import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(5, 3))
table[['north', 'south', 'east']].plot(kind='bar', ax=ax, rot=0)
ax.set_title('Units per month')
ax.set_xlabel('month')
ax.set_ylabel('units')
fig.tight_layout()"""

QUESTION = "Which manager's region brought in the most revenue? Show units per month too."
CHART_REQUEST = "Chart the units per month for each region."
ANSWER = "{{best}}'s region brought in the most: {{best_revenue}}."
CHART_ANSWER = "Here is the chart of units per month."
CHART_TITLE = "Units per month"


def story_replies() -> list[str]:
    """The model's replies for the two turns: the analysis (its table as the block's value),
    then the chart."""
    return [
        reply([ANALYSIS, "table"], ANSWER, thinking="Merge, group by manager, pivot by month."),
        reply([CHART], CHART_ANSWER, thinking="A bar chart of the pivot table."),
    ]


def expected() -> tuple[str, float]:
    """The best manager and their revenue, computed here, outside the sandbox."""
    sales = pd.read_csv(io.StringIO(SALES))
    merged = sales.merge(pd.read_csv(io.StringIO(MANAGERS)), on="region")
    revenue = (merged["units"] * merged["price"]).groupby(merged["manager"]).sum()
    return str(revenue.idxmax()), float(revenue.max())


def expected_answer() -> str:
    """The first turn's answer as every channel must show it."""
    manager, revenue = expected()
    return f"{manager}'s region brought in the most: {revenue}."
