package ledger_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/junban/junban/internal/ledger/stock"
)

// The Model has the ledger's semantics without Redis; a *ledger.Ledger answers the same.
func ExampleModel() {
	ctx := context.Background()
	m := stock.NewModel(nil)
	m.Put(stock.SKU{SKU: "SKU-1", SafetyStock: 2, Lots: []stock.Lot{
		{LotID: "L-late", Kind: stock.KindOnHand, Good: true, BestBefore: "2027-03-01", RegSeq: 1,
			ValidFrom: stock.MinDate, ValidTo: stock.MaxDate, Sellable: 5},
		{LotID: "L-early", Kind: stock.KindOnHand, Good: true, BestBefore: "2027-01-01", RegSeq: 2,
			ValidFrom: stock.MinDate, ValidTo: stock.MaxDate, Sellable: 3},
		{LotID: "PO-7", Kind: stock.KindPlanned, Good: true, RegSeq: 3,
			ValidFrom: "2026-12-10", ValidTo: stock.MaxDate, Sellable: 10},
	}})

	res, _ := m.Apply(ctx, stock.AllocateRequest{OpID: "evt-1:1:alloc", SKU: "SKU-1", Qty: 4,
		TargetDate: "2026-12-01", Mode: stock.ModeShip})
	for _, mv := range res.Moves {
		fmt.Println(mv.Index, mv.LotID, mv.From, "->", mv.To, mv.Qty)
	}
	fmt.Println("version", res.Version)

	// 4 sellable left on 2026-12-01 (PO-7 is not valid yet): shipping 3 would dip into
	// the safety stock of 2; reserving does not check it.
	_, err := m.Apply(ctx, stock.AllocateRequest{OpID: "evt-2:1:alloc", SKU: "SKU-1", Qty: 3,
		TargetDate: "2026-12-01", Mode: stock.ModeShip})
	fmt.Println(stock.Reason(err), errors.Is(err, stock.ErrSafetyStock))

	// A replay returns the first answer and moves nothing.
	again, _ := m.Apply(ctx, stock.AllocateRequest{OpID: "evt-1:1:alloc", SKU: "SKU-1", Qty: 4,
		TargetDate: "2026-12-01", Mode: stock.ModeShip})
	fmt.Println("replayed", again.Replayed, "version", again.Version)
	// Output:
	// 0 L-early sellable -> allocated 3
	// 1 L-late sellable -> allocated 1
	// version 1
	// ERR_SAFETY_STOCK true
	// replayed true version 1
}
